#include "accuracy/validation_run.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "runtime/onednn_info.h"

namespace fusor {
namespace {

const std::string kModel = std::string(FUSOR_MODELS_DIR) + "/squeezenet1_1.onnx";

// The defaults of the cost model on this machine's target: what validation scores needs no
// calibration to be a profile.
StatusOr<HardwareProfile> ThisMachine() {
  FUSOR_ASSIGN_OR_RETURN(TargetFingerprint target, DetectTarget(OneDnnIsa(), OneDnnVersion()));
  HardwareProfile p;
  p.target = target;
  return p;
}

// Two regions of at most three ops, one round, short timings of any spread, machine checks of a
// few benchmarks and no quiet wait: the workflow's structure, not its figures (a test host is
// shared, and a timing too noisy for the validate policy would leave the region out). Every
// timing is still a real oneDNN run.
constexpr int kCheckBenchmarks = 4;
ValidationRunOptions Small() {
  ValidationRunOptions o;
  o.max_ops = 3;
  o.regions = 2;
  o.rounds = 1;
  o.timing.min_total_ns = 2'000'000;
  o.timing.max_cv = 10;
  o.timing.quiet_wait_ms = 0;
  o.machine_check_benchmarks = kCheckBenchmarks;
  o.settle_host_ms = 0;
  return o;
}

TEST(RunValidation, MeasuresEachRegionsAlternativesAndChecksTheMachineAround) {
  auto profile = ThisMachine();
  ASSERT_TRUE(profile.ok()) << profile.status().ToString();
  auto regions = HeldOutRegionsOfModels({kModel}, Small());
  ASSERT_TRUE(regions.ok()) << regions.status().ToString();
  ASSERT_EQ(regions->size(), 2u);
  std::set<std::string> phases;
  auto run = RunValidation(
      *regions, *profile, Small(),
      [&](const std::string& phase, size_t, size_t, const std::string&) { phases.insert(phase); });
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  const ValidationReport& r = run->report;
  EXPECT_EQ(r.regions, 2);
  EXPECT_EQ(r.skipped_unstable, 0);
  EXPECT_EQ(r.rounds, 2);  // One round for each of two regions.
  ASSERT_FALSE(r.items.empty());
  for (const ValidationItem& item : r.items) {
    EXPECT_EQ(item.model, "squeezenet1_1");
    EXPECT_GT(item.measured_ns, 0) << item.ops << " " << item.alternative;
    EXPECT_GT(item.predicted_ns, 0) << item.ops << " " << item.alternative;
    EXPECT_EQ(item.rounds_ns.size(), 1u);
  }
  EXPECT_EQ(r.items[0].alternative, "fused");
  EXPECT_EQ(r.items[1].alternative, "unfused");
  ASSERT_TRUE(run->before.has_value());
  ASSERT_TRUE(run->after.has_value());
  // No timing is unstable at this spread limit, so every benchmark of each check counts.
  EXPECT_EQ(run->before->benchmarks, kCheckBenchmarks);
  EXPECT_EQ(run->after->benchmarks, kCheckBenchmarks);
  EXPECT_GT(run->before->median_ratio, 0);
  EXPECT_GT(run->after->median_ratio, 0);
  EXPECT_EQ(phases,
            (std::set<std::string>{"machine check (before)", "measure", "machine check (after)"}));

  nlohmann::json j = ValidationRunToJson(*run);
  EXPECT_EQ(j["items"].size(), r.items.size());
  EXPECT_EQ(j["machine_check"]["before"]["benchmarks"], run->before->benchmarks);
  EXPECT_TRUE(j["machine_check"]["after"].contains("drifted"));
}

TEST(RunValidation, WithoutTheMachineCheckTheReportHasNone) {
  auto profile = ThisMachine();
  ASSERT_TRUE(profile.ok()) << profile.status().ToString();
  ValidationRunOptions o = Small();
  o.regions = 1;
  o.machine_check = false;
  auto run = RunValidation(std::vector<std::string>{kModel}, *profile, o);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->report.regions, 1);
  EXPECT_FALSE(run->before.has_value());
  EXPECT_FALSE(run->after.has_value());
  EXPECT_FALSE(ValidationRunToJson(*run).contains("machine_check"));
}

TEST(RunValidation, AModelThatDoesNotImportIsAnErrorNamingItsPath) {
  auto profile = ThisMachine();
  ASSERT_TRUE(profile.ok()) << profile.status().ToString();
  const std::string missing = std::string(FUSOR_MODELS_DIR) + "/no_such_model.onnx";
  auto run = RunValidation(std::vector<std::string>{kModel, missing}, *profile, Small());
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find(missing), std::string::npos) << run.status().ToString();
}

}  // namespace
}  // namespace fusor
