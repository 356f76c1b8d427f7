// The hardware profile: a target's fingerprint plus every constant of the analytical cost model,
// each with the error of its fit. One struct with documented defaults (after Halide's
// MachineParams); the defaults are plausible for a 2020s x86 server core and are only used before a
// target is calibrated. Serialised as fusor.v1.HardwareProfile and as JSON. The JSON parser is
// strict: an unknown or missing key is an error naming it. Values; thread-safe to share once built.
//
// JSON format, version "fusor.profile.v1":
//   {"format": "fusor.profile.v1", "cost_model_version": "...", "calibrated_unix_ms": N,
//    "target": {"id", "cpu_model", "isa", "cores", "l1d_bytes", "l2_bytes", "l3_bytes",
//               "vector_registers", "vector_width_bits", "onednn_version"},
//    "parameters": {"<name>": {"value": x, "rel_error": e, "samples": n}, ... every parameter},
//    "in_plan": {"l1_to_l2_ns_per_byte", "l2_to_l3_ns_per_byte", "l3_to_dram_ns_per_byte",
//                "samples"}}
// "in_plan" is optional when read: a profile written before it existed has no in-plan term (every
// constant 0), and so predicts a whole plan as the sum of its groups.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "proto/target.pb.h"

namespace fusor {

// Bump when the features or equations of cost_model.cc change, or the runtime's kernels get
// faster or slower (a new ISA build of the fused loops, say): plans scored, and calibration
// samples featurised or measured, by another version are stale.
inline constexpr const char* kCostModelVersion = "analytical-48";

struct TargetFingerprint {
  std::string cpu_model;
  std::string isa;  // The ISA oneDNN dispatches to: "avx2", "avx512_core", ...
  int32_t cores = 1;
  int64_t l1d_bytes = 32 << 10;
  int64_t l2_bytes = 512 << 10;
  int64_t l3_bytes = 16 << 20;
  int32_t vector_registers = 16;
  int32_t vector_width_bits = 256;
  std::string onednn_version;

  // Hex SHA-256 of every other field, truncated to 24 characters: the key plans are stored under.
  std::string Id() const;
};

// Reads the CPU model, core count and cache sizes from /proc and sysfs; the ISA and oneDNN version
// come from the runtime (which owns oneDNN), and fix the vector register file.
StatusOr<TargetFingerprint> DetectTarget(const std::string& onednn_isa,
                                         const std::string& onednn_version);

// The steps a read may fall below the level it is read from when its group runs alone: L1 to L2,
// L2 to L3, L3 to DRAM (costmodel/in_plan.h).
inline constexpr int kColdSteps = 3;

// What a plan adds to its groups' times (costmodel/in_plan.h): the fitted time per byte read one
// step below its alone level, ns per byte (0 adds nothing). Fitted by calibration on plans timed
// group by group inside the plan and alone, not by the fit of the other constants.
struct InPlanConstants {
  std::array<double, kColdSteps> ns_per_byte{};
  int samples = 0;  // Groups the fit saw (0: never fitted, no term).
};

// One fitted constant.
struct Fitted {
  double value = 0;
  double rel_error = 0;  // RMS relative error of the samples that pinned it (0: never fitted).
  int32_t samples = 0;
};

struct HardwareProfile {
  TargetFingerprint target;
  std::string cost_model_version = kCostModelVersion;
  int64_t calibrated_unix_ms = 0;  // 0: defaults, never calibrated.

  // Compute throughput per op class, GFLOP/s (transcendental: G evaluations/s), all cores.
  Fitted conv_gflops{200};
  Fitted depthwise_conv_gflops{30};
  Fitted matmul_gflops{250};
  Fitted elementwise_gflops{40};
  Fitted transcendental_gflops{8};
  Fitted jit_transcendental_gflops{20};  // exp / tanh in oneDNN eltwise and post-ops.
  Fitted erf_gflops{5};                  // Erf evaluations in our loops, G/s.
  Fitted jit_swish_gflops{15};           // Sigmoids of oneDNN's eltwise_swish (x * Sigmoid(x)).
  Fitted jit_sigmoid_gflops{15};         // Other sigmoids in oneDNN (eltwise_logistic, post-ops).
  Fitted reduction_gflops{20};
  // Bandwidth per memory level, GB/s.
  Fitted l1_read_gbps{400};
  Fitted l1_write_gbps{200};
  Fitted l2_read_gbps{200};
  Fitted l2_write_gbps{100};
  Fitted l3_read_gbps{80};
  Fitted l3_write_gbps{50};
  Fitted dram_read_gbps{20};
  Fitted dram_write_gbps{12};
  // Overheads.
  Fitted dispatch_ns{2000};        // Per kernel: primitive execute, thread fork/join.
  Fitted post_op_ns{100};          // Per oneDNN post-op, fixed.
  Fitted overlap_alpha{0.5};       // combine(c, m) = c + m - alpha * min(c, m).
  Fitted spill_ns_per_value{0.5};  // Per spilled live value per output vector.
  Fitted indexed_gelems{2};        // Index-mapped elements in fused loops, G elements/s.
  Fitted reorder_gbps{10};         // Layout reorders around conv / pooling, GB/s of tensor.
  Fitted loop_dispatch_ns{1000};   // Per fused-loop launch (our kernels, not oneDNN's).
  Fitted remap_gelems{1};          // Index lists re-mapped per dimension, G element-dims/s.
  Fitted loop_call_ns{20};         // Per value a fused loop pulls per tile or row chunk.
  Fitted run_call_ns{5};           // Per run of a streamed broadcast operand or Concat input.
  Fitted fork_ns{5000};            // Waking the thread team for one kernel of a parallel group.
  Fitted gather_gelems{1};         // Elements a fused loop indexes one at a time, G elements/s.
  Fitted handoff_ns{1000};         // Per tensor a group reads that another core partly wrote.
  Fitted handoff_gbps{20};         // Bytes of it moved from another core's cache, GB/s.
  Fitted transpose_gbps{10};       // Reorders between plain and channels-last (transposes).
  Fitted strided_gelems{1};        // Strided reads whose lines stay in L1, G elements/s.
  Fitted chain_gsteps{20};         // Steps of fused loops' single-pass chains, G element-steps/s.
  Fitted rnn_step_ns{1000};        // Per sequential step of oneDNN's RNN primitive (LSTM, GRU).

  InPlanConstants in_plan;  // What a whole plan adds to the sum of its groups.

  // Every parameter by name, in a fixed order (the JSON and the fitter use it).
  std::vector<std::pair<std::string, Fitted*>> Parameters();
  std::vector<std::pair<std::string, const Fitted*>> Parameters() const;
};

nlohmann::json InPlanConstantsToJson(const InPlanConstants& c);
// Strict, as the profile: every key of InPlanConstantsToJson, each constant in [0, 100] ns/byte.
StatusOr<InPlanConstants> InPlanConstantsFromJson(const nlohmann::json& j);

nlohmann::json ProfileToJson(const HardwareProfile& p);
StatusOr<HardwareProfile> ProfileFromJson(const nlohmann::json& j);
StatusOr<HardwareProfile> ProfileFromJsonText(const std::string& text);
// The largest profile file `fusor targets register` reads (a profile is a few KB).
inline constexpr int64_t kMaxProfileFileBytes = int64_t{1} << 20;

void ProfileToProto(const HardwareProfile& p, v1::HardwareProfile* out);
StatusOr<HardwareProfile> ProfileFromProto(const v1::HardwareProfile& p);

// Checks every parameter is finite and within physically plausible bounds for a CPU (for example a
// bandwidth between 1 GB/s and 10 TB/s, 0 <= alpha <= 1); the error names the parameter.
Status CheckPlausible(const HardwareProfile& p);

// The plausible range of a parameter by name, as CheckPlausible applies it; the fit stays inside.
std::pair<double, double> PlausibleRange(const std::string& name);

}  // namespace fusor
