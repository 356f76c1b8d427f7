#include "base/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace fusor::metrics {
namespace {

[[noreturn]] void Fatal(const std::string& message) {
  std::fprintf(stderr, "fusor metrics: %s\n", message.c_str());
  std::abort();
}

bool ValidName(std::string_view name, bool colon_allowed) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool letter =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon_allowed && c == ':');
    if (!letter && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

std::string Joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return "(" + out + ")";
}

// `{a="x",b="y"}` for the label set, with `extra` (a histogram's le) last; "" when empty.
std::string LabelText(const std::vector<std::string>& names, const LabelValues& values,
                      const std::string& extra = "") {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    out += (out.empty() ? "" : ",") + names[i] + "=\"" + EscapeLabelValue(values[i]) + "\"";
  }
  if (!extra.empty()) out += (out.empty() ? "" : ",") + extra;
  return out.empty() ? "" : "{" + out + "}";
}

void WriteSample(std::string* out, const std::string& name, const std::string& labels,
                 double value) {
  *out += name + labels + " " + FormatValue(value) + "\n";
}

}  // namespace

void WrongLabelCount(const std::vector<std::string>& label_names, size_t given) {
  Fatal("a metric with labels " + Joined(label_names) + " was given " + std::to_string(given) +
        " label values");
}

void Counter::Increment(double by) {
  if (by > 0) value_.fetch_add(by, std::memory_order_relaxed);
}

Histogram::Histogram(std::vector<double> upper_bounds)
    : upper_bounds_(std::move(upper_bounds)), bucket_counts_(upper_bounds_.size() + 1, 0) {
  if (!std::is_sorted(upper_bounds_.begin(), upper_bounds_.end())) {
    Fatal("histogram bounds must be sorted ascending");
  }
}

void Histogram::Observe(double value) {
  size_t bucket =
      std::lower_bound(upper_bounds_.begin(), upper_bounds_.end(), value) - upper_bounds_.begin();
  std::lock_guard<std::mutex> lock(mu_);
  ++bucket_counts_[bucket];
  ++count_;
  sum_ += value;
}

Histogram::Snapshot Histogram::Read() const {
  Snapshot s;
  s.upper_bounds = upper_bounds_;
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t running = 0;
  for (uint64_t c : bucket_counts_) s.cumulative_counts.push_back(running += c);
  s.count = count_;
  s.sum = sum_;
  return s;
}

std::vector<double> DurationBuckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
          1,     2.5,    5,     10,   30,    60,   120, 300,  600};
}

// A family of one name: its help, type and labels, and either metrics or callbacks.
struct Registry::Entry {
  std::string help;
  const char* type;  // "counter", "gauge", "histogram".
  std::vector<std::string> label_names;
  std::unique_ptr<Family<Counter>> counters;
  std::unique_ptr<Family<Gauge>> gauges;
  std::unique_ptr<Family<Histogram>> histograms;
  std::map<uint64_t, std::function<GaugeSamples()>> callbacks;

  void Write(const std::string& name, std::string* out) const;
};

void Registry::Entry::Write(const std::string& name, std::string* out) const {
  *out += "# HELP " + name + " " + EscapeHelp(help) + "\n";
  *out += "# TYPE " + name + " " + type + "\n";
  if (counters) {
    for (const auto& [labels, c] : counters->Children())
      WriteSample(out, name, LabelText(label_names, labels), c->Value());
  }
  if (gauges) {
    for (const auto& [labels, g] : gauges->Children())
      WriteSample(out, name, LabelText(label_names, labels), g->Value());
  }
  for (const auto& [id, read] : callbacks) {
    for (const auto& [labels, value] : read()) {
      if (labels.size() != label_names.size()) continue;  // Not a sample of this family.
      WriteSample(out, name, LabelText(label_names, labels), value);
    }
  }
  if (histograms) {
    for (const auto& [labels, h] : histograms->Children()) {
      Histogram::Snapshot s = h->Read();
      for (size_t i = 0; i <= s.upper_bounds.size(); ++i) {
        std::string le = i < s.upper_bounds.size() ? FormatValue(s.upper_bounds[i]) : "+Inf";
        WriteSample(out, name + "_bucket", LabelText(label_names, labels, "le=\"" + le + "\""),
                    static_cast<double>(s.cumulative_counts[i]));
      }
      WriteSample(out, name + "_sum", LabelText(label_names, labels), s.sum);
      WriteSample(out, name + "_count", LabelText(label_names, labels),
                  static_cast<double>(s.count));
    }
  }
}

Registry::Registry() = default;
Registry::~Registry() = default;

Registry& Registry::Default() {
  static Registry* registry = new Registry();  // Never destroyed: metrics may count until exit.
  return *registry;
}

Registry::Entry& Registry::FindOrAdd(const std::string& name, const std::string& help,
                                     const char* type,
                                     const std::vector<std::string>& label_names) {
  if (!ValidName(name, true)) Fatal("'" + name + "' is not a valid metric name");
  for (const std::string& label : label_names) {
    if (!ValidName(label, false) || label == "le" || label.rfind("__", 0) == 0) {
      Fatal("metric " + name + ": '" + label + "' is not a valid label name");
    }
  }
  std::unique_ptr<Entry>& entry = families_[name];
  if (!entry) {
    entry = std::make_unique<Entry>();
    entry->help = help;
    entry->type = type;
    entry->label_names = label_names;
  } else if (std::string_view(entry->type) != type || entry->label_names != label_names) {
    Fatal("metric " + name + " is already a " + entry->type + " with labels " +
          Joined(entry->label_names) + ", not a " + type + " with labels " + Joined(label_names));
  }
  return *entry;
}

Family<Counter>& Registry::AddCounter(const std::string& name, const std::string& help,
                                      std::vector<std::string> label_names) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry& e = FindOrAdd(name, help, "counter", label_names);
  if (!e.counters) {
    e.counters = std::make_unique<Family<Counter>>(std::move(label_names),
                                                   [] { return std::make_unique<Counter>(); });
  }
  return *e.counters;
}

Family<Gauge>& Registry::AddGauge(const std::string& name, const std::string& help,
                                  std::vector<std::string> label_names) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry& e = FindOrAdd(name, help, "gauge", label_names);
  if (!e.gauges) {
    e.gauges = std::make_unique<Family<Gauge>>(std::move(label_names),
                                               [] { return std::make_unique<Gauge>(); });
  }
  return *e.gauges;
}

Family<Histogram>& Registry::AddHistogram(const std::string& name, const std::string& help,
                                          std::vector<std::string> label_names,
                                          std::vector<double> upper_bounds) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry& e = FindOrAdd(name, help, "histogram", label_names);
  if (!e.histograms) {
    e.histograms = std::make_unique<Family<Histogram>>(
        std::move(label_names),
        [bounds = std::move(upper_bounds)] { return std::make_unique<Histogram>(bounds); });
  }
  return *e.histograms;
}

CallbackRegistration Registry::AddGaugeCallback(const std::string& name, const std::string& help,
                                                std::vector<std::string> label_names,
                                                std::function<GaugeSamples()> read) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry& e = FindOrAdd(name, help, "gauge", label_names);
  uint64_t id = next_callback_id_++;
  e.callbacks[id] = std::move(read);
  return CallbackRegistration(this, id);
}

void Registry::RemoveCallback(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [name, entry] : families_) entry->callbacks.erase(id);
}

std::string Registry::Exposition() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  for (const auto& [name, entry] : families_) entry->Write(name, &out);
  return out;
}

CallbackRegistration::CallbackRegistration(CallbackRegistration&& other) noexcept
    : registry_(other.registry_), id_(other.id_) {
  other.registry_ = nullptr;
}

CallbackRegistration& CallbackRegistration::operator=(CallbackRegistration&& other) noexcept {
  if (this != &other) {
    if (registry_ != nullptr) registry_->RemoveCallback(id_);
    registry_ = other.registry_;
    id_ = other.id_;
    other.registry_ = nullptr;
  }
  return *this;
}

CallbackRegistration::~CallbackRegistration() {
  if (registry_ != nullptr) registry_->RemoveCallback(id_);
}

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string EscapeHelp(std::string_view help) {
  std::string out;
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  return std::string(buf, end);
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace fusor::metrics
