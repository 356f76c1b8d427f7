// The memory a process may still take: MemAvailable, bounded by a cgroup's limit, and the refusal
// that names the amounts.
#include "base/host_memory.h"

#include <gtest/gtest.h>

namespace fusor {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;
constexpr char kMeminfo[] =
    "MemTotal:       24000000 kB\nMemFree:         1000000 kB\nMemAvailable:   20971520 kB\n";

TEST(HostMemory, MemAvailableAloneWhenNoCgroupLimits) {
  EXPECT_EQ(AvailableMemoryBytesFrom(kMeminfo, "", ""), 20 * kGiB);
  EXPECT_EQ(AvailableMemoryBytesFrom(kMeminfo, "max\n", "123456\n"), 20 * kGiB);
  // cgroup v1 without a limit reports a page-rounded 2^63.
  EXPECT_EQ(AvailableMemoryBytesFrom(kMeminfo, "9223372036854771712\n", "5000\n"), 20 * kGiB);
}

TEST(HostMemory, ACgroupLimitBelowTheHostsMemoryIsWhatCounts) {
  std::string limit = std::to_string(4 * kGiB) + "\n";
  std::string used = std::to_string(3 * kGiB) + "\n";
  EXPECT_EQ(AvailableMemoryBytesFrom(kMeminfo, limit, used), kGiB);
  // Over the limit already (the kernel reclaims): no room, never negative.
  EXPECT_EQ(AvailableMemoryBytesFrom(kMeminfo, used, limit), 0);
  // No /proc/meminfo but a cgroup: the cgroup's room.
  EXPECT_EQ(AvailableMemoryBytesFrom("", limit, used), kGiB);
}

TEST(HostMemory, NothingKnownIsUnknownNotZero) {
  EXPECT_EQ(AvailableMemoryBytesFrom("", "", ""), -1);
  EXPECT_EQ(AvailableMemoryBytesFrom("MemAvailable: junk kB\n", "max", ""), -1);
  EXPECT_TRUE(CheckHostMemory(int64_t{1} << 62, "anything", -1).ok());
}

TEST(HostMemory, ARequestOverTheRoomIsRefusedNamingWhatAndHowMuch) {
  EXPECT_TRUE(CheckHostMemory(7 * kGiB, "weights", 8 * kGiB).ok());
  Status s = CheckHostMemory(15 * kGiB / 2, "model 'big': its weights", 8 * kGiB);
  ASSERT_EQ(s.code(), Status::Code::kResourceExhausted);
  EXPECT_NE(s.message().find("model 'big': its weights needs 7.5 GiB"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("8.0 GiB"), std::string::npos) << s.message();
}

TEST(HostMemory, ByteStringUsesBinaryUnits) {
  EXPECT_EQ(ByteString(100), "100 B");
  EXPECT_EQ(ByteString(12 * 1024), "12.0 KiB");
  EXPECT_EQ(ByteString(3 * kGiB / 2), "1.5 GiB");
  EXPECT_EQ(ByteString(int64_t{5} << 40), "5.0 TiB");
}

TEST(HostMemory, ThisMachineReportsSomeMemory) {
  EXPECT_GT(AvailableMemoryBytes(), 0);  // Linux always has /proc/meminfo.
}

}  // namespace
}  // namespace fusor
