#include "client/calibration_summary.h"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>
#include <sstream>

#include "client/text_format.h"
#include "server/calibration_fit_samples.h"

namespace fusor {
namespace {

struct NoisyFamily {
  int benchmarks = 0;
  double worst_cv = 0;
};

// An entry of CalibrateResponse.unstable: "name (cv 0.140000)".
std::pair<std::string, double> NameAndCv(const std::string& entry) {
  const size_t cv = entry.find(" (cv ");
  if (cv == std::string::npos) return {entry, 0};
  return {entry.substr(0, cv), std::strtod(entry.c_str() + cv + 5, nullptr)};
}

std::string FitLines(const v1::CalibrateResponse& r) {
  std::string text =
      WrapText(fmt::format("fit over {} samples from {} calibration runs ({} measured now, run {})",
                           r.samples_used(), r.runs_used(), r.run_samples(), r.run_id()));
  if (r.samples_skipped() > 0) {
    text +=
        WrapText(fmt::format("{} stored samples were unreadable and skipped (see the tuner's log)",
                             r.samples_skipped()));
  }
  if (r.slow_timings() > 0) {
    text += WrapText(fmt::format(
        "{} timings left out of the fit, each over {:.2f}x its benchmark's quickest in those runs "
        "(the host slow for part of a run)",
        r.slow_timings(), kSlowCalibrationRun));
  }
  for (const v1::SlowCalibrationRun& slow : r.slow_runs()) {
    text += WrapText(fmt::format(
        "left out of the fit: run {}{}, {:.2f}x slower than the quickest run (a slow state of the "
        "host; if the machine itself got slower, calibrate with --fresh)",
        slow.run_id(), slow.run_id() == r.run_id() ? " (this one)" : "", slow.slowdown()));
  }
  if (!r.in_plan_fit().empty()) text += WrapText(r.in_plan_fit());
  return text;
}

std::string NoisyLines(const v1::CalibrateResponse& r, bool list_noisy) {
  if (r.unstable_size() == 0) return "";
  std::map<std::string, NoisyFamily> families;
  for (const std::string& entry : r.unstable()) {
    const auto [name, cv] = NameAndCv(entry);
    NoisyFamily& f = families[BenchmarkFamily(name)];
    ++f.benchmarks;
    f.worst_cv = std::max(f.worst_cv, cv);
  }
  std::string text =
      WrapText(fmt::format("{} benchmarks stayed too noisy to fit (another process busy?){}",
                           r.unstable_size(), list_noisy ? ":" : "; --list-noisy names each"));
  if (list_noisy) {
    for (const std::string& entry : r.unstable()) text += "  " + entry + "\n";
    return text;
  }
  TextTable table({"FAMILY", "NOISY", "WORST CV"});
  table.AlignRight(1);
  table.AlignRight(2);
  for (const auto& [family, f] : families) {
    table.Add({family, std::to_string(f.benchmarks), fmt::format("{:.2f}", f.worst_cv)});
  }
  table.FitTo(kTextColumns, 0);
  std::ostringstream out;
  table.Print(out, "  ");
  return text + out.str();
}

}  // namespace

std::string BenchmarkFamily(std::string_view benchmark) {
  size_t end = 0;
  while (end < benchmark.size() && benchmark[end] != '_' &&
         !std::isdigit(static_cast<unsigned char>(benchmark[end]))) {
    ++end;
  }
  return std::string(benchmark.substr(0, end == 0 ? benchmark.size() : end));
}

std::string CalibrationSummary(const v1::CalibrateResponse& r, bool list_noisy) {
  return FitLines(r) + NoisyLines(r, list_noisy);
}

}  // namespace fusor
