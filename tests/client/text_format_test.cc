// What the CLI prints for people: one format per kind of number, and tables whose columns line up.
#include "client/text_format.h"

#include <gtest/gtest.h>

#include <sstream>

namespace fusor {
namespace {

TEST(TextFormat, DurationsReadInTheirNaturalUnitAndUnknownIsADash) {
  EXPECT_EQ(DurationText(850), "850 ns");
  EXPECT_EQ(DurationText(12'500), "12.5 us");
  EXPECT_EQ(DurationText(3'250'000), "3.250 ms");
  EXPECT_EQ(DurationText(1.2e9), "1.200 s");
  EXPECT_EQ(DurationText(0), "-");
  EXPECT_EQ(DurationText(-5), "-");
}

TEST(TextFormat, RatiosAreBeforeOverAfterAndUnknownIsADash) {
  EXPECT_EQ(RatioText(3, 2), "1.50x");
  EXPECT_EQ(RatioText(0, 2), "-");
  EXPECT_EQ(RatioText(2, 0), "-");
}

TEST(TextFormat, TableColumnsLineUpUnderTheirHeaders) {
  TextTable t({"TARGET", "CORES"});
  t.Add({"a", "16"});
  t.Add({"a-much-longer-id", "2"});
  std::ostringstream out;
  t.Print(out, "  ");
  EXPECT_EQ(out.str(),
            "  TARGET            CORES\n"
            "  a                 16\n"
            "  a-much-longer-id  2\n");
}

TEST(TextFormat, NumbersAlignedRightLineUpOnTheirLastDigit) {
  TextTable t({"GROUP", "TIME"});
  t.AlignRight(1);
  t.Add({"0", "1.50"});
  t.Add({"1", "123.25"});
  std::ostringstream out;
  t.Print(out);
  EXPECT_EQ(out.str(),
            "GROUP    TIME\n"
            "0        1.50\n"
            "1      123.25\n");
}

TEST(TextFormat, ATableFittedToAWidthCutsItsFitColumnAndMarksTheCut) {
  TextTable t({"GRAPH", "MODEL", "STATUS"});
  t.Add({"abc", std::string(200, 'm'), "current"});
  t.Add({"def", "short", "stale"});
  t.FitTo(40, 1);
  std::ostringstream out;
  t.Print(out);
  std::istringstream lines(out.str());
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    EXPECT_LE(line.size(), 40u) << line;
    ++n;
  }
  EXPECT_EQ(n, 3);
  EXPECT_NE(out.str().find("m...  current"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("short"), std::string::npos) << out.str();
  EXPECT_EQ(CutText("abcdef", 6), "abcdef");
  EXPECT_EQ(CutText("abcdefg", 6), "abc...");
}

TEST(TextFormat, ATableThatFitsIsNotCut) {
  TextTable t({"A", "B"});
  t.Add({"x", "a-long-cell"});
  t.FitTo(100, 1);
  std::ostringstream out;
  t.Print(out);
  EXPECT_EQ(out.str(), "A  B\nx  a-long-cell\n");
}

TEST(TextFormat, LongTextWrapsAtSpacesWithIndentedContinuations) {
  EXPECT_EQ(WrapText("aaa bbb ccc", 7), "aaa bbb\n  ccc\n");
  EXPECT_EQ(WrapText("short", 100), "short\n");
}

TEST(TextFormat, NeverIsADashAndTimesCarryTheirUtcOffset) {
  EXPECT_EQ(LocalIsoTime(0), "-");
  std::string t = LocalIsoTime(1'764'000'000'000);
  ASSERT_EQ(t.size(), 25u) << t;  // 2025-11-24T16:00:00+00:00
  EXPECT_EQ(t[10], 'T');
  EXPECT_EQ(t[22], ':');
}

TEST(TextFormat, AgesReadInTheLargestUnitThatFitsAndTheFutureReadsIn) {
  const int64_t now = 1'764'000'000'000;
  EXPECT_EQ(AgoText(now - 12'000, now), "12 s ago");
  EXPECT_EQ(AgoText(now - 5 * 60'000, now), "5 min ago");
  EXPECT_EQ(AgoText(now - 3 * 3'600'000, now), "3 h ago");
  EXPECT_EQ(AgoText(now - 2 * 86'400'000, now), "2 d ago");
  EXPECT_EQ(AgoText(now + 40'000, now), "in 40 s");
  EXPECT_EQ(AgoText(0, now), "-");
}

}  // namespace
}  // namespace fusor
