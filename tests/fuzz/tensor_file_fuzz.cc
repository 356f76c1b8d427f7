// Fuzz harness: tensor file bytes -> ParseTensorFile, as `fusor run --input NAME=FILE` reads a
// .npy or .pb file. Every input is parsed as both formats. Accepted: the tensor's value count
// matches its dims, and writing it and reading that back gives the same bytes again (a
// normalised round trip: float64 .npy data is held as float32, so the first write may differ from
// the input).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <google/protobuf/stubs/logging.h>

#include "graph/tensor_file.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

// Returns whether the bytes were accepted as the format of `path`.
bool ParseAndRoundTrip(std::string_view bytes, const std::string& path) {
  auto t = fusor::ParseTensorFile(bytes, path);
  if (!t.ok()) {
    FUZZ_CHECK(!t.status().message().empty(), "a tensor file error without a message");
    return false;
  }
  FUZZ_CHECK(static_cast<int64_t>(t->f.size() + t->i.size()) == t->num_elements(),
             "an accepted tensor holds " + std::to_string(t->f.size() + t->i.size()) +
                 " values, its dims " + std::to_string(t->num_elements()));
  auto written = fusor::TensorFileBytes(*t, path);
  if (!written.ok()) return true;  // A dtype the writer lacks (float16 in a .pb).
  auto back = fusor::ParseTensorFile(*written, path);
  FUZZ_CHECK(back.ok(), "a written tensor file is refused: " + back.status().ToString());
  FUZZ_CHECK(back->dtype == t->dtype && back->dims == t->dims, "dtype or dims changed");
  auto again = fusor::TensorFileBytes(*back, path);
  FUZZ_CHECK(again.ok() && *again == *written, "a tensor changed over a write and read");
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet = (google::protobuf::SetLogHandler(nullptr), true);
  (void)quiet;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const bool npy = ParseAndRoundTrip(bytes, "fuzz.npy");
  const bool pb = ParseAndRoundTrip(bytes, "fuzz.pb");
  fusor::fuzz::Accepted() = npy || pb;
  return 0;
}
