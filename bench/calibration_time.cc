// Calibration time, measured: `fusor calibrate`'s work (TuningService::Calibrate: settle the host,
// time the calibration suite on oneDNN, fit over the calibration log) run --runs times on a fresh
// SQLite database in a temporary directory, each run's wall time and the median printed beside the
// goal (the service's calibration time limit, 60 s on two cores). Each run after the first also
// fits over the earlier runs, as repeated `fusor calibrate` does.
//   build/bench/calibration_time [--runs N]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "server/tuning_service.h"

namespace fusor {
namespace {

int Main(int argc, char** argv) {
  CLI::App app{"Times TuningService::Calibrate on this machine"};
  int runs = 3;
  app.add_option("--runs", runs, "Calibrations to time")->check(CLI::Range(1, 100));
  CLI11_PARSE(app, argc, argv);

  char tmpl[] = "/tmp/fusor_calibration_time_XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return std::perror("mkdtemp"), 1;
  const std::string dir = tmpl;
  TuningServiceOptions options;
  options.db_location = dir + "/tuning.db";
  auto service = TuningService::Open(options);
  if (!service.ok()) return std::fprintf(stderr, "%s\n", service.status().ToString().c_str()), 1;

  std::vector<double> seconds;
  for (int i = 0; i < runs; ++i) {
    auto start = std::chrono::steady_clock::now();
    auto r = (*service)->Calibrate({});
    seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    if (!r.ok()) return std::fprintf(stderr, "%s\n", r.status().ToString().c_str()), 1;
    std::printf("run %d: %.1f s (%d samples this run, %d fitted)\n", i + 1, seconds.back(),
                r->run_samples(), r->samples_used());
  }
  std::filesystem::remove_all(dir);
  std::vector<double> sorted = seconds;
  std::sort(sorted.begin(), sorted.end());
  std::printf("median %.1f s, max %.1f s over %d runs; goal: under %.0f s\n",
              sorted[sorted.size() / 2], sorted.back(), runs, options.calibration_time_limit_s);
  return 0;
}

}  // namespace
}  // namespace fusor

int main(int argc, char** argv) { return fusor::Main(argc, argv); }
