// Bearer tokens and the roles they grant, loaded from fusord's token file. A request carries
// `authorization: Bearer TOKEN` in its metadata; Authenticate maps it to the Principal the file
// names, and Authorize checks that the principal holds the role an RPC needs:
//   read  — GetPlan, QueryPlans, ListTargets, ListAgents, ListMeasurementJobs
//   tune  — Tune
//   agent — RegisterAgent, LeaseMeasurementJob, RenewMeasurementLease, ReportMeasurement: a
//           measurement agent (`fusor agent`) on a target machine
//   admin — RegisterTarget, Calibrate; admin implies read, tune and agent.
//
// Token file format (version 1), one token per line, '#' starts a comment, blank lines ignored:
//   TOKEN ROLES [NAME]
// TOKEN is 16 or more printable non-space ASCII characters (generate one with
// `openssl rand -hex 32`); ROLES is a comma-separated list of read, tune, agent, admin; NAME is who
// holds it, written to the request log instead of the token (default "token@LINE"). A duplicate
// token, an unknown role or a short token is an error naming the line, so fusord refuses to start
// rather than run with a policy nobody wrote.
//
// Only SHA-256 digests of the tokens stay in memory, and lookup is by digest, so the time a lookup
// takes says nothing about how much of a guessed token was right. Immutable after Load; safe to
// share between threads.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

#include "base/status.h"

namespace fusor {

enum Role : uint8_t {
  kRoleRead = 1,
  kRoleTune = 2,
  kRoleAdmin = 4,
  kRoleAgent = 8,
};
using RoleSet = uint8_t;
constexpr RoleSet kAllRoles = kRoleRead | kRoleTune | kRoleAdmin | kRoleAgent;

std::string_view RoleName(Role role);
// "read,tune" or "admin"; for logs and error messages.
std::string RoleSetText(RoleSet roles);

// Who made a request, as the token file names them.
struct Principal {
  std::string name;
  RoleSet roles = 0;
};

class AccessTokens {
 public:
  static StatusOr<AccessTokens> Load(const std::string& path);
  // `origin` names the text in errors ("tokens.txt:3: ...").
  static StatusOr<AccessTokens> Parse(std::string_view text, std::string_view origin);

  // `authorization` is the metadata value ("Bearer TOKEN"); empty when the request had none.
  // Unauthenticated when missing, malformed or unknown.
  StatusOr<Principal> Authenticate(std::string_view authorization) const;

  size_t size() const { return by_digest_.size(); }

 private:
  Status AddLine(std::string_view line, std::string_view where);

  std::unordered_map<std::string, Principal> by_digest_;  // SHA-256 hex of the token.
};

// PermissionDenied naming the method and the missing role unless `who` holds `needed`
// (admin counts as every role).
Status Authorize(const Principal& who, Role needed, std::string_view method);

}  // namespace fusor
