#include "client/confidence_text.h"

#include <spdlog/fmt/fmt.h>

#include <cmath>

#include "client/text_format.h"

namespace fusor {
namespace {

// A spread as a percentage; "unknown" when it could not be told (too few rounds).
std::string SpreadText(double spread) {
  return std::isfinite(spread) ? fmt::format("{:.1f}%", spread * 100) : "unknown";
}

}  // namespace

std::string ConfidenceText(const v1::MeasuredConfidence& c) {
  if (c.rounds() == 0) return "";
  std::string text = fmt::format("{} round{}, {} runs, spread {}", c.rounds(),
                                 c.rounds() == 1 ? "" : "s", c.samples(), SpreadText(c.spread()));
  if (c.unfused_spread() > 0) text += fmt::format(" (unfused {})", SpreadText(c.unfused_spread()));
  if (c.speedup_low() > 0 && std::isfinite(c.speedup_high())) {
    text += fmt::format(", speed-up {}-{} (95%)", RatioText(c.speedup_low(), 1),
                        RatioText(c.speedup_high(), 1));
  }
  text += ", " + c.decision();
  if (!c.measured_by().empty()) text += ", timed by agent " + c.measured_by();
  return text;
}

std::vector<std::string> ConfidenceNotes(const v1::MeasuredConfidence& c) {
  std::vector<std::string> notes;
  if (c.rounds() == 0) return notes;
  if (c.unstable() || !c.settled()) {
    notes.push_back(fmt::format(
        "the timings did not settle within the budget (spread {}{}): the measured speed-up is "
        "not reliable; tune again on a quieter host or with a longer --time-limit",
        SpreadText(c.spread()),
        c.unfused_spread() > 0 ? ", unfused " + SpreadText(c.unfused_spread()) : ""));
  }
  if (c.uncalibrated()) {
    notes.push_back(
        "the target was not calibrated: the plan was searched with default constants; run "
        "`fusor calibrate` and tune again");
  }
  return notes;
}

}  // namespace fusor
