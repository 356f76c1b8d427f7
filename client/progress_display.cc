#include "client/progress_display.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace fusor {

ProgressDisplay::ProgressDisplay() : tty_(isatty(STDERR_FILENO) == 1) {}

ProgressDisplay::~ProgressDisplay() { Finish(); }

void ProgressDisplay::Update(const std::string& stage, double fraction, const std::string& detail) {
  fraction = std::clamp(fraction, 0.0, 1.0);
  if (!tty_) {
    // A new detail within a stage is news too (a measurement job leased, a lease expired).
    if (stage != last_stage_ || detail != last_detail_)
      std::fprintf(stderr, "%-8s %3.0f%%  %s\n", stage.c_str(), 100 * fraction, detail.c_str());
    last_stage_ = stage;
    last_detail_ = detail;
    return;
  }
  constexpr int kWidth = 30;
  int filled = static_cast<int>(fraction * kWidth);
  std::string bar(filled, '#');
  bar.resize(kWidth, '.');
  std::fprintf(stderr, "\r\033[K[%s] %3.0f%% %-8s %.54s", bar.c_str(), 100 * fraction,
               stage.c_str(), detail.c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void ProgressDisplay::Finish() {
  if (tty_ && drawn_) std::fprintf(stderr, "\r\033[K");
  drawn_ = false;
}

}  // namespace fusor
