// The replay driver: runs one fuzz harness without libFuzzer, so the normal (g++) build exercises
// every harness in ctest. It feeds the harness each file of its seed corpus, then a fixed number of
// deterministic mutations of each seed (bit flips, interesting bytes, erased, duplicated and
// inserted ranges, truncation, splices of two seeds, numbers swapped for extreme ones, protobuf
// varints set to extreme values). Seeds
// named "ok-*" must be accepted by the harness. A crash, a broken harness property (abort) or a
// refused "ok-*" seed fails the run. Deterministic: the same corpus and arguments give the same
// inputs; the input that crashed is written to ./fuzz-replay-crash, for libFuzzer's binary or a
// debugger. Usage: fuzz_replay_NAME [--mutations N] CORPUS_DIR_OR_FILE...
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

namespace fs = std::filesystem;

struct Seed {
  std::string name;
  std::string bytes;
};

std::vector<Seed> ReadSeeds(const std::vector<std::string>& paths) {
  std::vector<fs::path> files;
  for (const std::string& p : paths) {
    if (fs::is_directory(p)) {
      for (const auto& e : fs::recursive_directory_iterator(p)) {
        if (e.is_regular_file()) files.push_back(e.path());
      }
    } else {
      files.emplace_back(p);
    }
  }
  std::sort(files.begin(), files.end());
  std::vector<Seed> seeds;
  for (const fs::path& f : files) {
    std::ifstream in(f, std::ios::binary);
    if (!in) FUZZ_CHECK(false, "cannot read seed '" + f.string() + "'");
    seeds.push_back({f.filename().string(), std::string(std::istreambuf_iterator<char>(in), {})});
  }
  return seeds;
}

// The input being run, for the crash handler.
const std::string* g_current = nullptr;

void OnCrash(int sig) {
  constexpr char kPath[] = "fuzz-replay-crash";
  if (g_current != nullptr) {
    int fd = ::open(kPath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ssize_t unused = ::write(fd, g_current->data(), g_current->size());
      (void)unused;
      ::close(fd);
      constexpr char kNote[] = "the crashing input is in ./fuzz-replay-crash\n";
      unused = ::write(2, kNote, sizeof(kNote) - 1);
    }
  }
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

bool Run(const std::string& bytes) {
  g_current = &bytes;
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  return fusor::fuzz::Accepted();
}

// Extreme values for the numbers of text formats (JSON, token files).
constexpr std::array<std::string_view, 10> kNumbers = {"0",
                                                       "-1",
                                                       "2147483648",
                                                       "4294968320",
                                                       "-9223372036854775808",
                                                       "18446744073709551616",
                                                       "1e308",
                                                       "-0.0",
                                                       "NaN",
                                                       "99999999999999999999999999"};

constexpr std::array<uint8_t, 18> kBytes = {0,   1,   0x7f, 0x80, 0xff, 0xfe, '9', '-',  '"',
                                            '{', '}', '[',  ']',  ',',  ':',  '#', '\n', ' '};

class Mutator {
 public:
  Mutator(const std::vector<Seed>& seeds, uint64_t seed) : seeds_(seeds), rng_(seed) {}

  std::string Mutate(std::string s) {
    const int ops = 1 + static_cast<int>(Below(4));
    for (int i = 0; i < ops; ++i) s = MutateOnce(std::move(s));
    return s;
  }

 private:
  uint64_t Below(uint64_t n) { return n == 0 ? 0 : rng_() % n; }

  std::string MutateOnce(std::string s) {
    if (s.empty()) return std::string(1, static_cast<char>(kBytes[Below(kBytes.size())]));
    const size_t pos = Below(s.size());
    const size_t len = 1 + Below(std::min<size_t>(s.size() - pos, 1 + s.size() / 8));
    switch (Below(10)) {
      case 0:
        s[pos] = static_cast<char>(s[pos] ^ (1 << Below(8)));
        break;
      case 1:
        s[pos] = static_cast<char>(kBytes[Below(kBytes.size())]);
        break;
      case 2:
        s.erase(pos, len);
        break;
      case 3:
        if (s.size() < (1 << 20)) s.insert(Below(s.size() + 1), s.substr(pos, len));
        break;
      case 4: {
        std::string bytes(1 + Below(8), '\0');
        for (char& c : bytes) c = static_cast<char>(Below(256));
        s.insert(pos, bytes);
        break;
      }
      case 5:
        s.resize(pos);
        break;
      case 6: {
        const std::string& other = seeds_[Below(seeds_.size())].bytes;
        s = s.substr(0, pos) + other.substr(Below(other.size() + 1));
        break;
      }
      case 7: {
        // A run of digits becomes an extreme number; binary formats get a varint-like run.
        size_t start = pos;
        while (start < s.size() && !(s[start] >= '0' && s[start] <= '9')) ++start;
        if (start == s.size()) {
          s.replace(pos, std::min<size_t>(len, 5), std::string(5, '\xff'));
          break;
        }
        size_t end = start;
        while (end < s.size() && s[end] >= '0' && s[end] <= '9') ++end;
        s.replace(start, end - start, kNumbers[Below(kNumbers.size())]);
        break;
      }
      case 8:
        s = VarintBecomesExtreme(std::move(s), pos);
        break;
      default:
        s.insert(pos, std::string(1, static_cast<char>(kBytes[Below(kBytes.size())])));
        break;
    }
    return s;
  }

  // Protobuf: the first one-byte varint field from `pos` on (a byte with a clear top bit after a
  // tag byte of wire type 0) becomes 0, -1, 2^31 or 2^63 - 1, as a stride, an axis or a count
  // would in a crafted model. Byte-level changes almost never hit such a value exactly.
  std::string VarintBecomesExtreme(std::string s, size_t pos) {
    static const std::array<std::string_view, 4> kVarints = {
        std::string_view("\x00", 1), "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",
        "\x80\x80\x80\x80\x08", "\xff\xff\xff\xff\xff\xff\xff\xff\x7f"};
    for (size_t at = std::max<size_t>(pos, 1); at < s.size(); ++at) {
      const auto tag = static_cast<uint8_t>(s[at - 1]);
      if ((tag & 0x87) == 0 && tag != 0 && (static_cast<uint8_t>(s[at]) & 0x80) == 0) {
        s.replace(at, 1, kVarints[Below(kVarints.size())]);
        return s;
      }
    }
    return s;
  }

  const std::vector<Seed>& seeds_;
  std::mt19937_64 rng_;
};

}  // namespace

int main(int argc, char** argv) {
  int mutations = 100;
  std::vector<std::string> paths;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--mutations" && i + 1 < argc) {
      mutations = std::stoi(argv[++i]);
    } else {
      paths.push_back(arg);
    }
  }
  for (int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL}) std::signal(sig, OnCrash);
  const std::vector<Seed> seeds = ReadSeeds(paths);
  if (seeds.empty()) {
    std::fprintf(stderr, "no seeds under the paths given\n");
    return 1;
  }
  int failures = 0, accepted = 0, runs = 0;
  for (const Seed& seed : seeds) {
    const bool ok = Run(seed.bytes);
    ++runs;
    accepted += ok;
    if (seed.name.rfind("ok-", 0) == 0 && !ok) {
      std::fprintf(stderr, "seed %s must be accepted and was refused\n", seed.name.c_str());
      ++failures;
    }
  }
  for (size_t i = 0; i < seeds.size(); ++i) {
    Mutator m(seeds, 0x5eed0000 + i);
    for (int k = 0; k < mutations; ++k) {
      accepted += Run(m.Mutate(seeds[i].bytes));
      ++runs;
    }
  }
  std::printf("%d inputs (%zu seeds, %d mutations each), %d accepted, %d seed failures\n", runs,
              seeds.size(), mutations, accepted, failures);
  return failures == 0 ? 0 : 1;
}
