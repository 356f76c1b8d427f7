// The metrics registry (base/metrics.h) and its text exposition, read back with a strict parser.
#include "base/metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <thread>
#include <vector>

#include "tests/base/prometheus_text.h"

namespace fusor::metrics {
namespace {

using fusor::testing::Exposition;
using fusor::testing::ParseExposition;

Exposition Parsed(const Registry& r) {
  auto parsed = ParseExposition(r.Exposition());
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString() << "\n" << r.Exposition();
  return parsed.ok() ? *parsed : Exposition();
}

TEST(Metrics, CountersAndGaugesAreWrittenWithHelpTypeAndEscapedLabels) {
  Registry r;
  auto& rpcs = r.AddCounter("test_rpcs_total", "RPCs \\ handled\nby method", {"method", "code"});
  rpcs.With({"GetPlan", "OK"}).Increment();
  rpcs.With({"GetPlan", "OK"}).Increment(2);
  rpcs.With({"we\"ird\\name\nx", "NOT_FOUND"}).Increment();
  rpcs.With({"GetPlan", "OK"}).Increment(-5);  // Ignored: a counter never goes down.
  r.AddGauge("test_depth", "Depth").With({}).Set(7.5);

  const std::string text = r.Exposition();
  EXPECT_NE(text.find("# HELP test_rpcs_total RPCs \\\\ handled\\nby method\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("# TYPE test_rpcs_total counter\n"), std::string::npos) << text;
  EXPECT_NE(text.find("test_rpcs_total{method=\"we\\\"ird\\\\name\\nx\",code=\"NOT_FOUND\"} 1\n"),
            std::string::npos)
      << text;
  Exposition e = Parsed(r);
  EXPECT_EQ(e.types.at("test_rpcs_total"), "counter");
  EXPECT_EQ(e.types.at("test_depth"), "gauge");
  EXPECT_EQ(e.help.at("test_depth"), "Depth");
  EXPECT_EQ(e.Value("test_rpcs_total{code=\"OK\",method=\"GetPlan\"}"), 3);
  EXPECT_EQ(e.Value("test_rpcs_total{code=\"NOT_FOUND\",method=\"we\"ird\\name\nx\"}"), 1);
  EXPECT_EQ(e.Value("test_depth"), 7.5);
}

TEST(Metrics, HistogramBucketsAreCumulativeWithSumAndCount) {
  Registry r;
  auto& h = r.AddHistogram("test_duration_seconds", "Durations", {"op"}, {0.1, 1, 10});
  for (double v : {0.05, 0.1, 0.5, 2.0, 20.0}) h.With({"get"}).Observe(v);
  Exposition e = Parsed(r);
  EXPECT_EQ(e.types.at("test_duration_seconds"), "histogram");
  EXPECT_EQ(e.Value("test_duration_seconds_bucket{le=\"0.1\",op=\"get\"}"), 2);  // Inclusive.
  EXPECT_EQ(e.Value("test_duration_seconds_bucket{le=\"1\",op=\"get\"}"), 3);
  EXPECT_EQ(e.Value("test_duration_seconds_bucket{le=\"10\",op=\"get\"}"), 4);
  EXPECT_EQ(e.Value("test_duration_seconds_bucket{le=\"+Inf\",op=\"get\"}"), 5);
  EXPECT_EQ(e.Value("test_duration_seconds_count{op=\"get\"}"), 5);
  EXPECT_DOUBLE_EQ(e.Value("test_duration_seconds_sum{op=\"get\"}"), 22.65);
}

TEST(Metrics, GaugeCallbacksAreReadAtEachScrapeUntilTheirRegistrationEnds) {
  Registry r;
  double depth = 3;
  {
    CallbackRegistration reg = r.AddGaugeCallback("test_queue", "Queue", {"target"}, [&] {
      return GaugeSamples{{{"a"}, depth}, {{"b"}, depth * 2}};
    });
    EXPECT_EQ(Parsed(r).Value("test_queue{target=\"b\"}"), 6);
    depth = 4;
    EXPECT_EQ(Parsed(r).Value("test_queue{target=\"a\"}"), 4);
  }
  Exposition after = Parsed(r);
  EXPECT_EQ(after.samples.count("test_queue{target=\"a\"}"), 0u);
  EXPECT_EQ(after.types.at("test_queue"), "gauge");  // The family stays declared.
}

TEST(Metrics, AskingForAFamilyAgainReturnsTheSameOne) {
  Registry r;
  auto& a = r.AddCounter("test_total", "T", {"x"});
  auto& b = r.AddCounter("test_total", "T", {"x"});
  EXPECT_EQ(&a, &b);
  EXPECT_EQ(&a.With({"1"}), &b.With({"1"}));
}

TEST(Metrics, ConcurrentIncrementsAreAllCounted) {
  Registry r;
  auto& c = r.AddCounter("test_concurrent_total", "C", {"thread"});
  auto& h = r.AddHistogram("test_concurrent_seconds", "H", {}, {1});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10000; ++i) {
        c.With({std::to_string(t % 2)}).Increment();
        h.With({}).Observe(0.5);
      }
    });
  }
  for (auto& t : threads) t.join();
  Exposition e = Parsed(r);
  EXPECT_EQ(e.Value("test_concurrent_total{thread=\"0\"}") +
                e.Value("test_concurrent_total{thread=\"1\"}"),
            40000);
  EXPECT_EQ(e.Value("test_concurrent_seconds_count"), 40000);
}

TEST(Metrics, ValuesAreWrittenSoTheyReadBackExactly) {
  EXPECT_EQ(FormatValue(1), "1");
  EXPECT_EQ(FormatValue(0.1), "0.1");
  EXPECT_EQ(FormatValue(HUGE_VAL), "+Inf");
  EXPECT_EQ(FormatValue(-HUGE_VAL), "-Inf");
  EXPECT_EQ(FormatValue(NAN), "NaN");
  EXPECT_EQ(std::stod(FormatValue(1.0 / 3)), 1.0 / 3);
}

TEST(Metrics, TheParserRejectsASampleOfAnUndeclaredFamily) {
  EXPECT_FALSE(ParseExposition("# TYPE a counter\nb 1\n").ok());
  EXPECT_FALSE(ParseExposition("# TYPE a counter\na{x=\"1} 1\n").ok());
  EXPECT_FALSE(ParseExposition("# TYPE a gauge\na{x=\"1\"} one\n").ok());
  EXPECT_TRUE(ParseExposition("# TYPE a histogram\na_bucket{le=\"+Inf\"} 1\na_count 1\n").ok());
}

}  // namespace
}  // namespace fusor::metrics
