#include "client/text_format.h"

#include <algorithm>
#include <cstdlib>
#include <ctime>

#include <spdlog/fmt/fmt.h>

namespace fusor {

std::string CutText(std::string_view text, size_t width) {
  if (text.size() <= width) return std::string(text);
  if (width <= 3) return std::string(text.substr(0, width));
  return std::string(text.substr(0, width - 3)) + "...";
}

std::string WrapText(std::string_view text, size_t width) {
  std::string out, line;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(' ', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view word = text.substr(start, end - start);
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      out += line + "\n";
      line = " ";  // With the space below, a continuation starts with two.
    }
    line += (line.empty() ? "" : " ") + std::string(word);
    start = end + 1;
  }
  return out + line + "\n";
}

std::vector<size_t> TextTable::Widths(size_t indent) const {
  std::vector<size_t> widths(rows_.front().size(), 0);
  for (const auto& row : rows_) {
    for (size_t i = 0; i < row.size() && i < widths.size(); ++i) {
      widths[i] = std::max(widths[i], row[i].size());
    }
  }
  if (!fit_ || fit_->column >= widths.size()) return widths;
  // A line is its cells at their column's width, two spaces between columns.
  size_t line = indent + 2 * (widths.size() - 1);
  for (size_t w : widths) line += w;
  size_t& cut = widths[fit_->column];
  if (line > fit_->width)
    cut = std::max(rows_.front()[fit_->column].size(), cut - std::min(cut, line - fit_->width));
  return widths;
}

void TextTable::Print(std::ostream& out, std::string_view indent) const {
  const std::vector<size_t> widths = Widths(indent.size());
  for (const auto& row : rows_) {
    std::string line(indent);
    for (size_t i = 0; i < row.size(); ++i) {
      const std::string cell = i < widths.size() ? CutText(row[i], widths[i]) : row[i];
      const size_t pad = i < widths.size() ? widths[i] - cell.size() : 0;
      const bool right = std::count(right_.begin(), right_.end(), i) > 0;
      const bool last = i + 1 == row.size();
      if (right) line += std::string(pad, ' ');
      line += cell;
      if (!last && !right) line += std::string(pad, ' ');
      if (!last) line += "  ";
    }
    out << line << "\n";
  }
}

std::string DurationText(double ns) {
  if (!(ns > 0)) return "-";
  if (ns < 1e3) return fmt::format("{:.0f} ns", ns);
  if (ns < 1e6) return fmt::format("{:.1f} us", ns / 1e3);
  if (ns < 1e9) return fmt::format("{:.3f} ms", ns / 1e6);
  return fmt::format("{:.3f} s", ns / 1e9);
}

std::string RatioText(double before, double after) {
  if (!(before > 0) || !(after > 0)) return "-";
  return fmt::format("{:.2f}x", before / after);
}

std::string CostModelText(std::string_view version, int64_t residual_training_samples) {
  if (residual_training_samples <= 0) return fmt::format("{} alone", version);
  return fmt::format("{} + learned residual ({} timings)", version, residual_training_samples);
}

std::string LocalIsoTime(int64_t unix_ms) {
  if (unix_ms == 0) return "-";
  std::time_t seconds = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  localtime_r(&seconds, &tm);
  char text[40];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S%z", &tm);
  const std::string out = text;  // %z is +hhmm; ISO 8601's extended form is +hh:mm.
  const size_t minutes = out.size() - 2;
  return out.substr(0, minutes) + ":" + out.substr(minutes);
}

std::string AgoText(int64_t unix_ms, int64_t now_unix_ms) {
  if (unix_ms == 0) return "-";
  const int64_t s = std::abs(now_unix_ms - unix_ms) / 1000;
  const std::string span = s < 120      ? fmt::format("{} s", s)
                           : s < 7200   ? fmt::format("{} min", s / 60)
                           : s < 172800 ? fmt::format("{} h", s / 3600)
                                        : fmt::format("{} d", s / 86400);
  return unix_ms > now_unix_ms ? "in " + span : span + " ago";
}

}  // namespace fusor
