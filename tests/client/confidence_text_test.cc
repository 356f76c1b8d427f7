// What `fusor tune` and `fusor db show` say about a measured plan's confidence: the protocol's
// account in one line, and a note whenever the speed-up rests on timings that did not settle or
// on an uncalibrated target.
#include "client/confidence_text.h"

#include <gtest/gtest.h>

#include <limits>

namespace fusor {
namespace {

v1::MeasuredConfidence Settled() {
  v1::MeasuredConfidence c;
  c.set_rounds(3);
  c.set_samples(171);
  c.set_spread(0.021);
  c.set_unfused_spread(0.03);
  c.set_speedup_low(2.41);
  c.set_speedup_high(2.70);
  c.set_decision("chosen by measurement");
  c.set_settled(true);
  return c;
}

TEST(ConfidenceText, ASettledMeasurementReadsInOneLineWithoutNotes) {
  EXPECT_EQ(ConfidenceText(Settled()),
            "3 rounds, 171 runs, spread 2.1% (unfused 3.0%), speed-up 2.41x-2.70x (95%), chosen "
            "by measurement");
  EXPECT_TRUE(ConfidenceNotes(Settled()).empty());
}

TEST(ConfidenceText, APlanAnAgentTimedNamesTheAgent) {
  v1::MeasuredConfidence c = Settled();
  c.set_measured_by("farm-a-0c1d2e3f");
  EXPECT_EQ(ConfidenceText(c),
            "3 rounds, 171 runs, spread 2.1% (unfused 3.0%), speed-up 2.41x-2.70x (95%), chosen "
            "by measurement, timed by agent farm-a-0c1d2e3f");
}

TEST(ConfidenceText, TimingsThatDidNotSettleAndAnUncalibratedTargetEachGetANote) {
  v1::MeasuredConfidence c = Settled();
  c.set_settled(false);
  c.set_unstable(true);
  c.set_spread(1.75);
  c.set_uncalibrated(true);
  std::vector<std::string> notes = ConfidenceNotes(c);
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_NE(notes[0].find("spread 175.0%"), std::string::npos) << notes[0];
  EXPECT_NE(notes[0].find("not reliable"), std::string::npos) << notes[0];
  EXPECT_NE(notes[1].find("not calibrated"), std::string::npos) << notes[1];
}

TEST(ConfidenceText, APlanWithoutConfidenceSaysNothingAndAnUnknownSpreadIsNamed) {
  EXPECT_EQ(ConfidenceText(v1::MeasuredConfidence()), "");
  EXPECT_TRUE(ConfidenceNotes(v1::MeasuredConfidence()).empty());
  v1::MeasuredConfidence one_round = Settled();
  one_round.set_rounds(1);
  one_round.set_spread(std::numeric_limits<double>::infinity());
  one_round.set_speedup_high(std::numeric_limits<double>::infinity());
  one_round.set_settled(false);
  EXPECT_EQ(
      ConfidenceText(one_round).rfind("1 round, 171 runs, spread unknown (unfused 3.0%), ", 0), 0u)
      << ConfidenceText(one_round);
}

}  // namespace
}  // namespace fusor
