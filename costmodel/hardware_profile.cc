#include "costmodel/hardware_profile.h"

#include <cmath>
#include <fstream>
#include <optional>
#include <set>
#include <thread>
#include <type_traits>

#include "base/sha256.h"
#include "graph/json_integer.h"

namespace fusor {
namespace {

constexpr const char* kProfileFormat = "fusor.profile.v1";

std::string ReadFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// "32K", "512K", "32768K", "1M" -> bytes; 0 when unreadable.
int64_t ParseCacheSize(const std::string& text) {
  if (text.empty()) return 0;
  int64_t v = 0;
  size_t i = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])))
    v = v * 10 + (text[i++] - '0');
  char unit = i < text.size() ? text[i] : ' ';
  if (unit == 'K') return v << 10;
  if (unit == 'M') return v << 20;
  return v;
}

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      return colon == std::string::npos ? line : line.substr(colon + 2);
    }
  }
  return "unknown";
}

void ReadCaches(TargetFingerprint* t) {
  const std::string base = "/sys/devices/system/cpu/cpu0/cache/index";
  for (int i = 0; i < 8; ++i) {
    std::string dir = base + std::to_string(i) + "/";
    std::string level = ReadFirstLine(dir + "level");
    if (level.empty()) break;
    std::string type = ReadFirstLine(dir + "type");
    int64_t size = ParseCacheSize(ReadFirstLine(dir + "size"));
    if (size == 0 || type == "Instruction") continue;
    if (level == "1") t->l1d_bytes = size;
    if (level == "2") t->l2_bytes = size;
    if (level == "3") t->l3_bytes = size;
  }
}

void SetVectorFile(TargetFingerprint* t) {
  if (t->isa.find("avx512") != std::string::npos || t->isa.find("amx") != std::string::npos) {
    t->vector_registers = 32;
    t->vector_width_bits = 512;
  } else if (t->isa.find("avx") != std::string::npos) {
    t->vector_registers = 16;
    t->vector_width_bits = 256;
  } else {
    t->vector_registers = 16;
    t->vector_width_bits = 128;
  }
}

nlohmann::json TargetToJson(const TargetFingerprint& t) {
  return {{"id", t.Id()},
          {"cpu_model", t.cpu_model},
          {"isa", t.isa},
          {"cores", t.cores},
          {"l1d_bytes", t.l1d_bytes},
          {"l2_bytes", t.l2_bytes},
          {"l3_bytes", t.l3_bytes},
          {"vector_registers", t.vector_registers},
          {"vector_width_bits", t.vector_width_bits},
          {"onednn_version", t.onednn_version}};
}

// Strict object reading: every expected key present, no other key.
Status CheckKeys(const nlohmann::json& j, const std::set<std::string>& keys,
                 const std::string& where) {
  if (!j.is_object()) return Status::InvalidArgument(where + " must be a JSON object");
  for (const auto& [k, v] : j.items()) {
    if (!keys.count(k)) return Status::InvalidArgument(where + ": unknown key '" + k + "'");
  }
  for (const auto& k : keys) {
    if (!j.contains(k)) return Status::InvalidArgument(where + ": missing key '" + k + "'");
  }
  return Status::Ok();
}

template <typename T>
Status Read(const nlohmann::json& j, const std::string& key, const std::string& where, T* out) {
  try {
    if constexpr (std::is_integral_v<T>) {
      std::optional<T> x = JsonInteger<T>(j.at(key));
      if (!x) {
        return Status::InvalidArgument(where + ": key '" + key + "' is " + j.at(key).dump() +
                                       ", not an integer in range");
      }
      *out = *x;
    } else {
      *out = j.at(key).get<T>();
    }
  } catch (const nlohmann::json::exception&) {
    return Status::InvalidArgument(where + ": key '" + key + "' has the wrong type");
  }
  return Status::Ok();
}

StatusOr<TargetFingerprint> TargetFromJson(const nlohmann::json& j) {
  const std::string where = "profile target";
  FUSOR_RETURN_IF_ERROR(
      CheckKeys(j,
                {"id", "cpu_model", "isa", "cores", "l1d_bytes", "l2_bytes", "l3_bytes",
                 "vector_registers", "vector_width_bits", "onednn_version"},
                where));
  TargetFingerprint t;
  std::string id;
  FUSOR_RETURN_IF_ERROR(Read(j, "id", where, &id));
  FUSOR_RETURN_IF_ERROR(Read(j, "cpu_model", where, &t.cpu_model));
  FUSOR_RETURN_IF_ERROR(Read(j, "isa", where, &t.isa));
  FUSOR_RETURN_IF_ERROR(Read(j, "cores", where, &t.cores));
  FUSOR_RETURN_IF_ERROR(Read(j, "l1d_bytes", where, &t.l1d_bytes));
  FUSOR_RETURN_IF_ERROR(Read(j, "l2_bytes", where, &t.l2_bytes));
  FUSOR_RETURN_IF_ERROR(Read(j, "l3_bytes", where, &t.l3_bytes));
  FUSOR_RETURN_IF_ERROR(Read(j, "vector_registers", where, &t.vector_registers));
  FUSOR_RETURN_IF_ERROR(Read(j, "vector_width_bits", where, &t.vector_width_bits));
  FUSOR_RETURN_IF_ERROR(Read(j, "onednn_version", where, &t.onednn_version));
  if (id != t.Id()) {
    return Status::InvalidArgument(where + ": id '" + id +
                                   "' does not match its fields (expected '" + t.Id() +
                                   "'); was the file edited by hand?");
  }
  return t;
}

StatusOr<Fitted> FittedFromJson(const nlohmann::json& j, const std::string& name) {
  const std::string where = "profile parameter '" + name + "'";
  FUSOR_RETURN_IF_ERROR(CheckKeys(j, {"value", "rel_error", "samples"}, where));
  Fitted f;
  FUSOR_RETURN_IF_ERROR(Read(j, "value", where, &f.value));
  FUSOR_RETURN_IF_ERROR(Read(j, "rel_error", where, &f.rel_error));
  FUSOR_RETURN_IF_ERROR(Read(j, "samples", where, &f.samples));
  return f;
}

struct Bounds {
  double lo, hi;
};

Bounds PlausibleBounds(const std::string& name) {
  if (name.find("_gflops") != std::string::npos) return {0.05, 100000};
  if (name.find("_gbps") != std::string::npos) return {1, 10000};
  if (name == "indexed_gelems" || name == "remap_gelems" || name == "gather_gelems" ||
      name == "chain_gsteps" || name == "strided_gelems") {
    return {0.01, 10000};
  }
  if (name == "loop_call_ns" || name == "run_call_ns") return {0.1, 1e4};
  if (name == "fork_ns") return {10, 1e6};
  if (name == "handoff_ns") return {0, 1e6};
  if (name == "dispatch_ns" || name == "loop_dispatch_ns" || name == "rnn_step_ns") return {1, 1e6};
  if (name == "post_op_ns") return {0, 1e5};
  if (name == "overlap_alpha") return {0, 1};
  return {0, 1e3};  // spill_ns_per_value
}

}  // namespace

std::string TargetFingerprint::Id() const {
  Sha256 h;
  h.UpdateString("fusor.target.v1");
  h.UpdateString(cpu_model);
  h.UpdateString(isa);
  h.UpdateI64(cores);
  h.UpdateI64(l1d_bytes);
  h.UpdateI64(l2_bytes);
  h.UpdateI64(l3_bytes);
  h.UpdateI64(vector_registers);
  h.UpdateI64(vector_width_bits);
  h.UpdateString(onednn_version);
  return h.FinishHex().substr(0, 24);
}

StatusOr<TargetFingerprint> DetectTarget(const std::string& onednn_isa,
                                         const std::string& onednn_version) {
  TargetFingerprint t;
  t.cpu_model = CpuModel();
  t.isa = onednn_isa;
  t.onednn_version = onednn_version;
  t.cores = static_cast<int32_t>(std::max(1u, std::thread::hardware_concurrency()));
  ReadCaches(&t);
  SetVectorFile(&t);
  return t;
}

std::vector<std::pair<std::string, Fitted*>> HardwareProfile::Parameters() {
  return {{"conv_gflops", &conv_gflops},
          {"depthwise_conv_gflops", &depthwise_conv_gflops},
          {"matmul_gflops", &matmul_gflops},
          {"elementwise_gflops", &elementwise_gflops},
          {"transcendental_gflops", &transcendental_gflops},
          {"jit_transcendental_gflops", &jit_transcendental_gflops},
          {"erf_gflops", &erf_gflops},
          {"jit_swish_gflops", &jit_swish_gflops},
          {"jit_sigmoid_gflops", &jit_sigmoid_gflops},
          {"reduction_gflops", &reduction_gflops},
          {"l1_read_gbps", &l1_read_gbps},
          {"l1_write_gbps", &l1_write_gbps},
          {"l2_read_gbps", &l2_read_gbps},
          {"l2_write_gbps", &l2_write_gbps},
          {"l3_read_gbps", &l3_read_gbps},
          {"l3_write_gbps", &l3_write_gbps},
          {"dram_read_gbps", &dram_read_gbps},
          {"dram_write_gbps", &dram_write_gbps},
          {"dispatch_ns", &dispatch_ns},
          {"post_op_ns", &post_op_ns},
          {"overlap_alpha", &overlap_alpha},
          {"spill_ns_per_value", &spill_ns_per_value},
          {"indexed_gelems", &indexed_gelems},
          {"reorder_gbps", &reorder_gbps},
          {"loop_dispatch_ns", &loop_dispatch_ns},
          {"remap_gelems", &remap_gelems},
          {"loop_call_ns", &loop_call_ns},
          {"run_call_ns", &run_call_ns},
          {"fork_ns", &fork_ns},
          {"gather_gelems", &gather_gelems},
          {"handoff_ns", &handoff_ns},
          {"handoff_gbps", &handoff_gbps},
          {"transpose_gbps", &transpose_gbps},
          {"chain_gsteps", &chain_gsteps},
          {"strided_gelems", &strided_gelems},
          {"rnn_step_ns", &rnn_step_ns}};
}

std::vector<std::pair<std::string, const Fitted*>> HardwareProfile::Parameters() const {
  std::vector<std::pair<std::string, const Fitted*>> out;
  for (auto& [name, f] : const_cast<HardwareProfile*>(this)->Parameters())
    out.emplace_back(name, f);
  return out;
}

namespace {

constexpr const char* kInPlanKeys[kColdSteps] = {"l1_to_l2_ns_per_byte", "l2_to_l3_ns_per_byte",
                                                 "l3_to_dram_ns_per_byte"};

// A read one step colder costs at most a DRAM line's latency per byte of it: ~100 ns / 64 B.
constexpr double kMaxInPlanNsPerByte = 100;

Status CheckInPlan(const InPlanConstants& c) {
  for (int s = 0; s < kColdSteps; ++s) {
    const double v = c.ns_per_byte[s];
    if (!std::isfinite(v) || v < 0 || v > kMaxInPlanNsPerByte) {
      return Status::InvalidArgument("profile in_plan '" + std::string(kInPlanKeys[s]) + "' = " +
                                     std::to_string(v) + " is outside the plausible range [0, " +
                                     std::to_string(kMaxInPlanNsPerByte) + "] ns/byte");
    }
  }
  if (c.samples < 0) return Status::InvalidArgument("profile in_plan 'samples' is negative");
  return Status::Ok();
}

}  // namespace

nlohmann::json InPlanConstantsToJson(const InPlanConstants& c) {
  nlohmann::json j = {{"samples", c.samples}};
  for (int s = 0; s < kColdSteps; ++s) j[kInPlanKeys[s]] = c.ns_per_byte[s];
  return j;
}

StatusOr<InPlanConstants> InPlanConstantsFromJson(const nlohmann::json& j) {
  const std::string where = "profile in_plan";
  FUSOR_RETURN_IF_ERROR(
      CheckKeys(j, {kInPlanKeys[0], kInPlanKeys[1], kInPlanKeys[2], "samples"}, where));
  InPlanConstants c;
  for (int s = 0; s < kColdSteps; ++s) {
    FUSOR_RETURN_IF_ERROR(Read(j, kInPlanKeys[s], where, &c.ns_per_byte[s]));
  }
  FUSOR_RETURN_IF_ERROR(Read(j, "samples", where, &c.samples));
  FUSOR_RETURN_IF_ERROR(CheckInPlan(c));
  return c;
}

nlohmann::json ProfileToJson(const HardwareProfile& p) {
  nlohmann::json params = nlohmann::json::object();
  for (const auto& [name, f] : p.Parameters()) {
    params[name] = {{"value", f->value}, {"rel_error", f->rel_error}, {"samples", f->samples}};
  }
  return {{"format", kProfileFormat},
          {"cost_model_version", p.cost_model_version},
          {"calibrated_unix_ms", p.calibrated_unix_ms},
          {"target", TargetToJson(p.target)},
          {"parameters", params},
          {"in_plan", InPlanConstantsToJson(p.in_plan)}};
}

StatusOr<HardwareProfile> ProfileFromJson(const nlohmann::json& j) {
  std::set<std::string> keys = {"format", "cost_model_version", "calibrated_unix_ms", "target",
                                "parameters"};
  if (j.is_object() && j.contains("in_plan")) keys.insert("in_plan");  // Absent: no term.
  FUSOR_RETURN_IF_ERROR(CheckKeys(j, keys, "profile"));
  std::string format;
  FUSOR_RETURN_IF_ERROR(Read(j, "format", "profile", &format));
  if (format != kProfileFormat) {
    return Status::InvalidArgument("profile format '" + format + "' is not '" + kProfileFormat +
                                   "'");
  }
  HardwareProfile p;
  FUSOR_RETURN_IF_ERROR(Read(j, "cost_model_version", "profile", &p.cost_model_version));
  FUSOR_RETURN_IF_ERROR(Read(j, "calibrated_unix_ms", "profile", &p.calibrated_unix_ms));
  FUSOR_ASSIGN_OR_RETURN(p.target, TargetFromJson(j.at("target")));
  std::set<std::string> names;
  for (const auto& [name, f] : p.Parameters()) names.insert(name);
  FUSOR_RETURN_IF_ERROR(CheckKeys(j.at("parameters"), names, "profile parameters"));
  for (auto& [name, f] : p.Parameters()) {
    FUSOR_ASSIGN_OR_RETURN(*f, FittedFromJson(j.at("parameters").at(name), name));
  }
  if (j.contains("in_plan")) {
    FUSOR_ASSIGN_OR_RETURN(p.in_plan, InPlanConstantsFromJson(j.at("in_plan")));
  }
  FUSOR_RETURN_IF_ERROR(CheckPlausible(p));
  return p;
}

StatusOr<HardwareProfile> ProfileFromJsonText(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::InvalidArgument("profile is not valid JSON");
  return ProfileFromJson(j);
}

void ProfileToProto(const HardwareProfile& p, v1::HardwareProfile* out) {
  auto* t = out->mutable_target();
  t->set_id(p.target.Id());
  t->set_cpu_model(p.target.cpu_model);
  t->set_isa(p.target.isa);
  t->set_cores(p.target.cores);
  t->set_l1d_bytes(p.target.l1d_bytes);
  t->set_l2_bytes(p.target.l2_bytes);
  t->set_l3_bytes(p.target.l3_bytes);
  t->set_vector_registers(p.target.vector_registers);
  t->set_vector_width_bits(p.target.vector_width_bits);
  t->set_onednn_version(p.target.onednn_version);
  out->set_cost_model_version(p.cost_model_version);
  out->set_calibrated_unix_ms(p.calibrated_unix_ms);
  // Proto fields share the JSON names, so reflection maps one to the other.
  const auto* desc = out->GetDescriptor();
  const auto* refl = out->GetReflection();
  for (const auto& [name, f] : p.Parameters()) {
    auto* msg = static_cast<v1::Fitted*>(refl->MutableMessage(out, desc->FindFieldByName(name)));
    msg->set_value(f->value);
    msg->set_rel_error(f->rel_error);
    msg->set_samples(f->samples);
  }
  v1::InPlanConstants* in_plan = out->mutable_in_plan();
  in_plan->set_l1_to_l2_ns_per_byte(p.in_plan.ns_per_byte[0]);
  in_plan->set_l2_to_l3_ns_per_byte(p.in_plan.ns_per_byte[1]);
  in_plan->set_l3_to_dram_ns_per_byte(p.in_plan.ns_per_byte[2]);
  in_plan->set_samples(p.in_plan.samples);
}

StatusOr<HardwareProfile> ProfileFromProto(const v1::HardwareProfile& in) {
  HardwareProfile p;
  const auto& t = in.target();
  p.target = TargetFingerprint{t.cpu_model(),
                               t.isa(),
                               t.cores(),
                               t.l1d_bytes(),
                               t.l2_bytes(),
                               t.l3_bytes(),
                               t.vector_registers(),
                               t.vector_width_bits(),
                               t.onednn_version()};
  if (!t.id().empty() && t.id() != p.target.Id()) {
    return Status::InvalidArgument("target id '" + t.id() + "' does not match its fingerprint");
  }
  p.cost_model_version = in.cost_model_version();
  p.calibrated_unix_ms = in.calibrated_unix_ms();
  const auto* desc = in.GetDescriptor();
  const auto* refl = in.GetReflection();
  for (auto& [name, f] : p.Parameters()) {
    const auto* field = desc->FindFieldByName(name);
    if (!refl->HasField(in, field)) {
      return Status::InvalidArgument("hardware profile is missing parameter '" + name + "'");
    }
    const auto& m = static_cast<const v1::Fitted&>(refl->GetMessage(in, field));
    *f = Fitted{m.value(), m.rel_error(), m.samples()};
  }
  // Absent (a profile from before the term): every constant 0, no term.
  const v1::InPlanConstants& in_plan = in.in_plan();
  p.in_plan.ns_per_byte = {in_plan.l1_to_l2_ns_per_byte(), in_plan.l2_to_l3_ns_per_byte(),
                           in_plan.l3_to_dram_ns_per_byte()};
  p.in_plan.samples = in_plan.samples();
  FUSOR_RETURN_IF_ERROR(CheckPlausible(p));
  return p;
}

std::pair<double, double> PlausibleRange(const std::string& name) {
  Bounds b = PlausibleBounds(name);
  return {b.lo, b.hi};
}

Status CheckPlausible(const HardwareProfile& p) {
  for (const auto& [name, f] : p.Parameters()) {
    Bounds b = PlausibleBounds(name);
    if (!std::isfinite(f->value) || f->value < b.lo || f->value > b.hi) {
      return Status::InvalidArgument("profile parameter '" + name +
                                     "' = " + std::to_string(f->value) +
                                     " is outside the plausible range [" + std::to_string(b.lo) +
                                     ", " + std::to_string(b.hi) + "]");
    }
    if (!std::isfinite(f->rel_error) || f->rel_error < 0 || f->samples < 0) {
      return Status::InvalidArgument("profile parameter '" + name + "' has an invalid fit record");
    }
  }
  if (p.target.vector_registers <= 0 || p.target.vector_width_bits <= 0 || p.target.cores <= 0) {
    return Status::InvalidArgument("profile target has no vector registers or cores");
  }
  return CheckInPlan(p.in_plan);
}

}  // namespace fusor
