// onnx_attribute_sweep: imports every ONNX file under the given paths with each integer attribute
// value set in turn to 0, -1 and 2^31 (one value of one attribute per import; every element of an
// INTS attribute up to 8 long, the first and last of a longer one), as `fusor tune` imports a
// model (ImportOnnxBytes with constant folding), and fails if any import ends in a signal. Each
// file's imports run in a child process, so a crash is reported with the file, node, attribute
// and value, and the sweep goes on. An import may succeed or fail; only a signal is a failure.
//
// Usage: onnx_attribute_sweep [--max-sites-per-file N] [--every K] [--first-site S] PATH...
//   PATH: a .onnx file or a directory searched for them (sorted, recursively).
//   --max-sites-per-file N: at most N mutation sites per file, evenly spread (0: all).
//   --every K: only every K-th file (a deterministic subset; 1: all).
//   --first-site S: skip each file's first S sites (to resume a sweep of a large model).
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <google/protobuf/stubs/logging.h>
#include <onnx/onnx_pb.h>

#include "base/input_file.h"
#include "graph/onnx_import.h"
#include "runtime/constant_evaluator.h"

namespace {

namespace fs = std::filesystem;

constexpr int64_t kValues[] = {0, -1, int64_t{1} << 31};
constexpr size_t kNoteBytes = 4096;

// One integer to change: node, attribute, element (-1 for an INT attribute).
struct Site {
  int node;
  int attr;
  int element;
};

std::vector<Site> SitesOf(const onnx::GraphProto& g) {
  std::vector<Site> sites;
  for (int n = 0; n < g.node_size(); ++n) {
    for (int a = 0; a < g.node(n).attribute_size(); ++a) {
      const onnx::AttributeProto& attr = g.node(n).attribute(a);
      if (attr.type() == onnx::AttributeProto::INT) sites.push_back({n, a, -1});
      if (attr.type() != onnx::AttributeProto::INTS) continue;
      for (int e = 0; e < attr.ints_size(); ++e) {
        if (attr.ints_size() <= 8 || e == 0 || e == attr.ints_size() - 1)
          sites.push_back({n, a, e});
      }
    }
  }
  return sites;
}

std::vector<Site> Spread(std::vector<Site> sites, size_t max_sites) {
  if (max_sites == 0 || sites.size() <= max_sites) return sites;
  std::vector<Site> out;
  for (size_t i = 0; i < max_sites; ++i) out.push_back(sites[i * sites.size() / max_sites]);
  return out;
}

std::string Describe(const onnx::ModelProto& m, const Site& s, int64_t value) {
  const onnx::NodeProto& n = m.graph().node(s.node);
  std::string where = "node " + std::to_string(s.node) + " '" + n.name() + "' (" + n.op_type() +
                      ") attribute " + n.attribute(s.attr).name();
  if (s.element >= 0) where += "[" + std::to_string(s.element) + "]";
  return where + " = " + std::to_string(value);
}

// The child: every mutation of one model, noting each in `note` before it runs.
int SweepFile(const onnx::ModelProto& model, const std::vector<Site>& sites, char* note) {
  google::protobuf::SetLogHandler(nullptr);
  const fusor::ImportOptions options = fusor::WithConstantFolding({});
  for (const Site& s : sites) {
    for (int64_t value : kValues) {
      onnx::ModelProto m = model;
      onnx::AttributeProto* a = m.mutable_graph()->mutable_node(s.node)->mutable_attribute(s.attr);
      if (s.element < 0) {
        a->set_i(value);
      } else {
        a->set_ints(s.element, value);
      }
      std::snprintf(note, kNoteBytes, "%s", Describe(model, s, value).c_str());
      (void)fusor::ImportOnnxBytes(m.SerializeAsString(), options);
    }
  }
  return 0;
}

std::vector<fs::path> OnnxFiles(const std::vector<std::string>& paths) {
  std::vector<fs::path> files;
  for (const std::string& p : paths) {
    if (fs::is_directory(p)) {
      for (const auto& e : fs::recursive_directory_iterator(p)) {
        if (e.is_regular_file() && e.path().extension() == ".onnx") files.push_back(e.path());
      }
    } else {
      files.push_back(p);
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

int main(int argc, char** argv) {
  size_t max_sites = 0, every = 1, first_site = 0;
  std::vector<std::string> paths;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--max-sites-per-file" && i + 1 < argc) {
      max_sites = std::stoul(argv[++i]);
    } else if (arg == "--every" && i + 1 < argc) {
      every = std::max<size_t>(1, std::stoul(argv[++i]));
    } else if (arg == "--first-site" && i + 1 < argc) {
      first_site = std::stoul(argv[++i]);
    } else {
      paths.push_back(arg);
    }
  }
  if (paths.empty()) {
    std::fprintf(stderr,
                 "usage: onnx_attribute_sweep [--max-sites-per-file N] [--every K] "
                 "[--first-site S] PATH...\n");
    return 2;
  }
  auto* note = static_cast<char*>(
      mmap(nullptr, kNoteBytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  std::vector<fs::path> files = OnnxFiles(paths);
  size_t swept = 0, imports = 0, crashes = 0;
  for (size_t f = 0; f < files.size(); f += every) {
    auto bytes = fusor::ReadInputFile(files[f].string(), "model file", int64_t{1} << 31);
    onnx::ModelProto model;
    if (!bytes.ok() || !model.ParseFromString(*bytes)) continue;
    std::vector<Site> sites = Spread(SitesOf(model.graph()), max_sites);
    sites.erase(sites.begin(), sites.begin() + std::min(first_site, sites.size()));
    if (sites.empty()) continue;
    note[0] = '\0';
    std::fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) _exit(SweepFile(model, sites, note));
    int status = 0;
    waitpid(pid, &status, 0);
    ++swept;
    imports += sites.size() * std::size(kValues);
    if (WIFSIGNALED(status)) {
      ++crashes;
      std::printf("CRASH signal %d (%s): %s: %s\n", WTERMSIG(status), strsignal(WTERMSIG(status)),
                  files[f].c_str(), note);
    }
  }
  std::printf("%zu files swept (of %zu found), %zu imports, %zu ended in a signal\n", swept,
              files.size(), imports, crashes);
  return crashes == 0 && swept > 0 ? 0 : 1;
}
