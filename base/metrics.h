// A small registry of Prometheus metrics: counters, gauges and histograms in labelled families,
// and gauges read at scrape time through callbacks, written out in the Prometheus text exposition
// format 0.0.4 (HELP and TYPE lines, label values escaped). Code that counts something asks the
// registry for a family once (by name, with its help text and label names) and then only
// increments or observes the metric of its label values; serving the text over HTTP is server/'s
// business (server/metrics_http.h).
//
// Ownership: the registry owns its families and each family its metrics, for the registry's
// lifetime, so references handed out stay valid; the process-wide registry (Default) lives until
// exit. A callback is owned by the CallbackRegistration returned for it, and is removed when that
// handle is destroyed (which waits for a scrape running it to finish).
//
// Thread-safety: everything is safe to call from several threads. Counter and Gauge are atomic;
// a Histogram takes its own mutex per observation; a family takes its mutex only to find or make
// the metric of a label set. A callback runs under the registry's mutex during Exposition, so it
// must not register metrics itself.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace fusor::metrics {

using LabelValues = std::vector<std::string>;

// A value that only goes up (a count of events, seconds spent).
class Counter {
 public:
  void Increment(double by = 1);  // `by` below 0 is ignored: a counter never goes down.
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// A value that goes up and down (jobs waiting).
class Gauge {
 public:
  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  void Add(double by) { value_.fetch_add(by, std::memory_order_relaxed); }
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// Observations counted into buckets by upper bound (inclusive), with their count and sum.
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);  // Sorted ascending; +Inf is implied.
  void Observe(double value);

  struct Snapshot {
    std::vector<double> upper_bounds;
    std::vector<uint64_t> cumulative_counts;  // One per bound, then +Inf (== count).
    uint64_t count = 0;
    double sum = 0;
  };
  Snapshot Read() const;

 private:
  const std::vector<double> upper_bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> bucket_counts_;  // Guarded by mu_, as are the two below; per bucket.
  uint64_t count_ = 0;
  double sum_ = 0;
};

// Bounds in seconds from 1 ms to 10 minutes, for durations from an RPC to a tuning job.
std::vector<double> DurationBuckets();

// The metrics of one name, one per set of label values.
template <typename Metric>
class Family {
 public:
  Family(std::vector<std::string> label_names, std::function<std::unique_ptr<Metric>()> make)
      : label_names_(std::move(label_names)), make_(std::move(make)) {}

  // The metric with these label values (as many as the family has label names), made on first
  // use. A wrong number of values is a programming error and aborts with the family's labels.
  Metric& With(const LabelValues& values);

  const std::vector<std::string>& label_names() const { return label_names_; }
  // The metrics made so far, in label order, for the exposition.
  std::vector<std::pair<LabelValues, const Metric*>> Children() const;

 private:
  const std::vector<std::string> label_names_;
  const std::function<std::unique_ptr<Metric>()> make_;
  mutable std::mutex mu_;
  std::map<LabelValues, std::unique_ptr<Metric>> children_;  // Guarded by mu_.
};

[[noreturn]] void WrongLabelCount(const std::vector<std::string>& label_names, size_t given);

template <typename Metric>
Metric& Family<Metric>::With(const LabelValues& values) {
  if (values.size() != label_names_.size()) WrongLabelCount(label_names_, values.size());
  std::lock_guard<std::mutex> lock(mu_);
  std::unique_ptr<Metric>& child = children_[values];
  if (!child) child = make_();
  return *child;
}

template <typename Metric>
std::vector<std::pair<LabelValues, const Metric*>> Family<Metric>::Children() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::pair<LabelValues, const Metric*>> out;
  for (const auto& [labels, metric] : children_) out.emplace_back(labels, metric.get());
  return out;
}

// The samples a gauge callback reports at a scrape: one value per label set.
using GaugeSamples = std::vector<std::pair<LabelValues, double>>;

class Registry;

// Keeps a gauge callback registered; destroying it removes the callback.
class CallbackRegistration {
 public:
  CallbackRegistration() = default;
  CallbackRegistration(Registry* registry, uint64_t id) : registry_(registry), id_(id) {}
  CallbackRegistration(CallbackRegistration&& other) noexcept;
  CallbackRegistration& operator=(CallbackRegistration&& other) noexcept;
  ~CallbackRegistration();

 private:
  Registry* registry_ = nullptr;
  uint64_t id_ = 0;
};

class Registry {
 public:
  Registry();
  ~Registry();
  // The process-wide registry fusord serves.
  static Registry& Default();

  // The family of this name, made on first call. Names follow Prometheus' rules ([a-zA-Z_:]
  // [a-zA-Z0-9_:]*, labels [a-zA-Z_][a-zA-Z0-9_]*); asking again for a name with another type or
  // other labels, or an invalid name, is a programming error and aborts naming the metric.
  Family<Counter>& AddCounter(const std::string& name, const std::string& help,
                              std::vector<std::string> label_names = {});
  Family<Gauge>& AddGauge(const std::string& name, const std::string& help,
                          std::vector<std::string> label_names = {});
  Family<Histogram>& AddHistogram(const std::string& name, const std::string& help,
                                  std::vector<std::string> label_names,
                                  std::vector<double> upper_bounds);
  // A gauge family whose samples `read` reports at each scrape (queue depth, calibration age).
  // Several callbacks may share one name; their samples are listed together.
  [[nodiscard]] CallbackRegistration AddGaugeCallback(const std::string& name,
                                                      const std::string& help,
                                                      std::vector<std::string> label_names,
                                                      std::function<GaugeSamples()> read);

  // Every family in name order, in the text exposition format 0.0.4.
  std::string Exposition() const;

 private:
  friend class CallbackRegistration;
  struct Entry;
  Entry& FindOrAdd(const std::string& name, const std::string& help, const char* type,
                   const std::vector<std::string>& label_names);
  void RemoveCallback(uint64_t id);

  mutable std::mutex mu_;
  std::map<std::string, std::unique_ptr<Entry>> families_;  // Guarded by mu_, by name.
  uint64_t next_callback_id_ = 1;                           // Guarded by mu_.
};

// Text exposition helpers, exposed for tests: a label value with backslash, double quote and
// newline escaped; a HELP text with backslash and newline escaped; a sample value ("+Inf",
// "-Inf", "NaN", or the shortest decimal that reads back exactly).
std::string EscapeLabelValue(std::string_view value);
std::string EscapeHelp(std::string_view help);
std::string FormatValue(double value);

// Seconds since `start` on the steady clock, for observing durations.
double SecondsSince(std::chrono::steady_clock::time_point start);

}  // namespace fusor::metrics
