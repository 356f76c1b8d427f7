#include "db/plan_order.h"

#include <charconv>
#include <tuple>

namespace fusor::db {
namespace {

constexpr std::string_view kTokenVersion = "p1";
constexpr char kHexDigits[] = "0123456789abcdef";

// Token body: "p1" then, for the creation time and each key field, "<length>:<bytes>".
void AppendField(std::string& out, std::string_view field) {
  out += std::to_string(field.size());
  out += ':';
  out += field;
}

bool ReadField(std::string_view& in, std::string& field) {
  size_t colon = in.find(':');
  if (colon == std::string_view::npos) return false;
  size_t length = 0;
  auto [end, ec] = std::from_chars(in.data(), in.data() + colon, length);
  if (ec != std::errc() || end != in.data() + colon || length > in.size() - colon - 1) return false;
  field.assign(in.substr(colon + 1, length));
  in.remove_prefix(colon + 1 + length);
  return true;
}

std::string Hex(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out += kHexDigits[c >> 4];
    out += kHexDigits[c & 15];
  }
  return out;
}

std::optional<std::string> Unhex(std::string_view hex) {
  if (hex.size() % 2 != 0) return std::nullopt;
  std::string out(hex.size() / 2, '\0');
  for (size_t i = 0; i < out.size(); ++i) {
    unsigned value = 0;
    auto [end, ec] = std::from_chars(hex.data() + 2 * i, hex.data() + 2 * i + 2, value, 16);
    if (ec != std::errc() || end != hex.data() + 2 * i + 2) return std::nullopt;
    out[i] = static_cast<char>(value);
  }
  return out;
}

auto KeyTuple(const PlanKey& k) {
  return std::tie(k.graph_hash, k.target_id, k.cost_model_version, k.search_options);
}

}  // namespace

double EffectiveTimeNs(const v1::Plan& plan) {
  return plan.measured_ns() > 0 ? plan.measured_ns() : plan.predicted_ns();
}

std::optional<double> SpeedUp(const v1::Plan& plan) {
  if (plan.measured_ns() > 0 && plan.unfused_measured_ns() > 0) {
    return plan.unfused_measured_ns() / plan.measured_ns();
  }
  if (plan.predicted_ns() > 0 && plan.unfused_predicted_ns() > 0) {
    return plan.unfused_predicted_ns() / plan.predicted_ns();
  }
  return std::nullopt;
}

bool BetterPlan(const v1::Plan& a, const v1::Plan& b) {
  bool a_measured = a.measured_ns() > 0;
  bool b_measured = b.measured_ns() > 0;
  if (a_measured != b_measured) return a_measured;
  if (EffectiveTimeNs(a) != EffectiveTimeNs(b)) return EffectiveTimeNs(a) < EffectiveTimeNs(b);
  return a.created_unix_ms() > b.created_unix_ms();
}

bool IncomingPlanWins(const v1::Plan& incoming, const v1::Plan& existing) {
  if (incoming.created_unix_ms() != existing.created_unix_ms()) {
    return incoming.created_unix_ms() > existing.created_unix_ms();
  }
  return BetterPlan(incoming, existing);
}

bool ListedBefore(const ListingPosition& a, const ListingPosition& b) {
  if (a.created_unix_ms != b.created_unix_ms) return a.created_unix_ms > b.created_unix_ms;
  return KeyTuple(a.key) < KeyTuple(b.key);
}

std::string EncodePageToken(const ListingPosition& last) {
  std::string body(kTokenVersion);
  AppendField(body, std::to_string(last.created_unix_ms));
  AppendField(body, last.key.graph_hash);
  AppendField(body, last.key.target_id);
  AppendField(body, last.key.cost_model_version);
  AppendField(body, last.key.search_options);
  return Hex(body);
}

StatusOr<ListingPosition> DecodePageToken(std::string_view token) {
  Status bad = Status::InvalidArgument(
      "page token '" + std::string(token.substr(0, 32)) +
      "' is not one this fusor issued; pass the next_page_token of the previous page");
  std::optional<std::string> body = Unhex(token);
  if (!body || !body->starts_with(kTokenVersion)) return bad;
  std::string_view in(*body);
  in.remove_prefix(kTokenVersion.size());
  std::string created;
  ListingPosition pos;
  PlanKey& k = pos.key;
  if (!ReadField(in, created) || !ReadField(in, k.graph_hash) || !ReadField(in, k.target_id) ||
      !ReadField(in, k.cost_model_version) || !ReadField(in, k.search_options) || !in.empty()) {
    return bad;
  }
  auto [end, ec] =
      std::from_chars(created.data(), created.data() + created.size(), pos.created_unix_ms);
  if (ec != std::errc() || end != created.data() + created.size()) return bad;
  return pos;
}

}  // namespace fusor::db
