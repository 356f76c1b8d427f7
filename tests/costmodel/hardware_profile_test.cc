#include "costmodel/hardware_profile.h"

#include <gtest/gtest.h>

namespace fusor {
namespace {

HardwareProfile Sample() {
  HardwareProfile p;
  p.target.cpu_model = "Test CPU";
  p.target.isa = "avx2";
  p.target.onednn_version = "2.6.3";
  p.calibrated_unix_ms = 1700000000000;
  p.matmul_gflops = {123.5, 0.04, 12};
  return p;
}

TEST(HardwareProfile, JsonRoundTrip) {
  HardwareProfile p = Sample();
  auto back = ProfileFromJsonText(ProfileToJson(p).dump());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->target.Id(), p.target.Id());
  EXPECT_DOUBLE_EQ(back->matmul_gflops.value, 123.5);
  EXPECT_DOUBLE_EQ(back->matmul_gflops.rel_error, 0.04);
  EXPECT_EQ(back->matmul_gflops.samples, 12);
  EXPECT_EQ(back->calibrated_unix_ms, p.calibrated_unix_ms);
}

TEST(HardwareProfile, UnknownKeyIsRejectedByName) {
  nlohmann::json j = ProfileToJson(Sample());
  j["parameters"]["warp_size"] = {{"value", 32}, {"rel_error", 0}, {"samples", 0}};
  auto p = ProfileFromJson(j);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(), "profile parameters: unknown key 'warp_size'");
  j = ProfileToJson(Sample());
  j["colour"] = "blue";
  EXPECT_EQ(ProfileFromJson(j).status().message(), "profile: unknown key 'colour'");
}

TEST(HardwareProfile, MissingKeyIsRejectedByName) {
  nlohmann::json j = ProfileToJson(Sample());
  j["parameters"].erase("dram_read_gbps");
  EXPECT_EQ(ProfileFromJson(j).status().message(),
            "profile parameters: missing key 'dram_read_gbps'");
  j = ProfileToJson(Sample());
  j["parameters"]["post_op_ns"].erase("samples");
  EXPECT_EQ(ProfileFromJson(j).status().message(),
            "profile parameter 'post_op_ns': missing key 'samples'");
}

// Found by tests/fuzz (hardware_profile): an integer key given a float beyond its range
// ("l3_bytes": 1.6e105) was converted with undefined behaviour (UBSan: "outside the range of
// representable values"), and an integer beyond the field's range wrapped.
TEST(HardwareProfile, IntegerKeyOutOfRangeOrFloatIsAnError) {
  nlohmann::json j = ProfileToJson(Sample());
  j["target"]["l3_bytes"] = 1.6e105;
  EXPECT_EQ(ProfileFromJson(j).status().message(),
            "profile target: key 'l3_bytes' is 1.6e+105, not an integer in range");
  j = ProfileToJson(Sample());
  j["target"]["cores"] = uint64_t{1} << 32;
  EXPECT_EQ(ProfileFromJson(j).status().message(),
            "profile target: key 'cores' is 4294967296, not an integer in range");
  j = ProfileToJson(Sample());
  j["parameters"]["conv_gflops"]["samples"] = 2.0;
  EXPECT_NE(ProfileFromJson(j).status().message().find("key 'samples' is 2.0"), std::string::npos)
      << ProfileFromJson(j).status().message();
}

TEST(HardwareProfile, WrongTypesImplausibleValuesAndEditedIds) {
  nlohmann::json j = ProfileToJson(Sample());
  j["parameters"]["dispatch_ns"]["value"] = "fast";
  EXPECT_NE(ProfileFromJson(j).status().message().find("'value' has the wrong type"),
            std::string::npos);
  j = ProfileToJson(Sample());
  j["parameters"]["overlap_alpha"]["value"] = 1.5;
  EXPECT_NE(ProfileFromJson(j).status().message().find("'overlap_alpha' = 1.5"), std::string::npos);
  j = ProfileToJson(Sample());
  j["target"]["cores"] = 64;
  EXPECT_NE(ProfileFromJson(j).status().message().find("does not match its fields"),
            std::string::npos);
  EXPECT_EQ(ProfileFromJsonText("{not json").status().message(), "profile is not valid JSON");
}

TEST(HardwareProfile, ProtoRoundTrip) {
  v1::HardwareProfile proto;
  ProfileToProto(Sample(), &proto);
  EXPECT_EQ(proto.target().id(), Sample().target.Id());
  EXPECT_DOUBLE_EQ(proto.matmul_gflops().value(), 123.5);
  auto back = ProfileFromProto(proto);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_DOUBLE_EQ(back->matmul_gflops.value, 123.5);
  proto.clear_spill_ns_per_value();
  EXPECT_EQ(ProfileFromProto(proto).status().message(),
            "hardware profile is missing parameter 'spill_ns_per_value'");
}

HardwareProfile WithInPlan() {
  HardwareProfile p = Sample();
  p.in_plan.ns_per_byte = {0.08, 0.012, 0.03};
  p.in_plan.samples = 18;
  return p;
}

TEST(HardwareProfile, InPlanConstantsRoundTripThroughJsonAndProto) {
  auto json = ProfileFromJsonText(ProfileToJson(WithInPlan()).dump());
  ASSERT_TRUE(json.ok()) << json.status().ToString();
  v1::HardwareProfile proto;
  ProfileToProto(WithInPlan(), &proto);
  auto from_proto = ProfileFromProto(proto);
  ASSERT_TRUE(from_proto.ok()) << from_proto.status().ToString();
  for (const HardwareProfile& back : {*json, *from_proto}) {
    EXPECT_EQ(back.in_plan.ns_per_byte, WithInPlan().in_plan.ns_per_byte);
    EXPECT_EQ(back.in_plan.samples, 18);
  }
}

TEST(HardwareProfile, AProfileWrittenBeforeTheInPlanTermLoadsWithoutIt) {
  nlohmann::json j = ProfileToJson(WithInPlan());
  j.erase("in_plan");
  auto json = ProfileFromJson(j);
  ASSERT_TRUE(json.ok()) << json.status().ToString();
  v1::HardwareProfile proto;
  ProfileToProto(WithInPlan(), &proto);
  proto.clear_in_plan();
  auto from_proto = ProfileFromProto(proto);
  ASSERT_TRUE(from_proto.ok()) << from_proto.status().ToString();
  for (const HardwareProfile& back : {*json, *from_proto}) {
    EXPECT_EQ(back.in_plan.ns_per_byte, (std::array<double, kColdSteps>{0, 0, 0}));
    EXPECT_EQ(back.in_plan.samples, 0);
  }
}

TEST(HardwareProfile, InPlanConstantsAreReadStrictly) {
  nlohmann::json j = ProfileToJson(WithInPlan());
  j["in_plan"]["l2_to_l3_ns_per_byte"] = -0.5;
  EXPECT_NE(ProfileFromJson(j).status().message().find("'l2_to_l3_ns_per_byte' = -0.5"),
            std::string::npos)
      << ProfileFromJson(j).status().message();
  j = ProfileToJson(WithInPlan());
  j["in_plan"].erase("samples");
  EXPECT_EQ(ProfileFromJson(j).status().message(), "profile in_plan: missing key 'samples'");
  j = ProfileToJson(WithInPlan());
  j["in_plan"]["l4_ns_per_byte"] = 1;
  EXPECT_EQ(ProfileFromJson(j).status().message(), "profile in_plan: unknown key 'l4_ns_per_byte'");
}

TEST(HardwareProfile, TargetIdDependsOnEveryField) {
  TargetFingerprint a = Sample().target;
  TargetFingerprint b = a;
  b.l2_bytes *= 2;
  EXPECT_NE(a.Id(), b.Id());
  b = a;
  b.onednn_version = "3.0";
  EXPECT_NE(a.Id(), b.Id());
  EXPECT_EQ(a.Id().size(), 24u);
}

TEST(DetectTarget, ReadsThisMachinePlausibly) {
  auto t = DetectTarget("avx2", "2.6.3");
  ASSERT_TRUE(t.ok());
  EXPECT_GE(t->cores, 1);
  EXPECT_GE(t->l1d_bytes, 8 << 10);
  EXPECT_LE(t->l1d_bytes, 2 << 20);
  EXPECT_GE(t->l2_bytes, t->l1d_bytes);
  EXPECT_GE(t->l3_bytes, 0);
  EXPECT_EQ(t->vector_registers, 16);
  EXPECT_EQ(t->vector_width_bits, 256);
  EXPECT_FALSE(t->cpu_model.empty());
  EXPECT_EQ(DetectTarget("avx512_core", "2.6.3")->vector_registers, 32);
}

}  // namespace
}  // namespace fusor
