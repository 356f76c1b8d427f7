#include "server/access_tokens.h"

#include <sys/stat.h>

#include <spdlog/spdlog.h>

#include <fstream>
#include <sstream>
#include <vector>

#include "base/sha256.h"

namespace fusor {
namespace {

constexpr size_t kMinTokenLength = 16;
constexpr std::string_view kBearer = "Bearer ";

std::string Digest(std::string_view token) {
  Sha256 h;
  h.Update(token);
  return h.FinishHex();
}

std::vector<std::string_view> Fields(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

bool IsTokenText(std::string_view token) {
  for (char c : token) {
    if (c <= ' ' || c > '~') return false;
  }
  return true;
}

StatusOr<RoleSet> ParseRole(std::string_view name) {
  if (name == "read") return RoleSet{kRoleRead};
  if (name == "tune") return RoleSet{kRoleTune};
  if (name == "agent") return RoleSet{kRoleAgent};
  if (name == "admin") return kAllRoles;
  return Status::InvalidArgument("unknown role '" + std::string(name) +
                                 "'; roles are read, tune, agent and admin, comma-separated");
}

StatusOr<RoleSet> ParseRoles(std::string_view text) {
  RoleSet roles = 0;
  size_t start = 0;
  while (true) {
    size_t comma = text.find(',', start);
    FUSOR_ASSIGN_OR_RETURN(RoleSet r, ParseRole(text.substr(start, comma - start)));
    roles |= r;
    if (comma == std::string_view::npos) return roles;
    start = comma + 1;
  }
}

}  // namespace

std::string_view RoleName(Role role) {
  switch (role) {
    case kRoleRead:
      return "read";
    case kRoleTune:
      return "tune";
    case kRoleAdmin:
      return "admin";
    case kRoleAgent:
      return "agent";
  }
  return "unknown";
}

std::string RoleSetText(RoleSet roles) {
  if (roles & kRoleAdmin) return "admin";
  std::string out;
  for (Role r : {kRoleRead, kRoleTune, kRoleAgent}) {
    if (!(roles & r)) continue;
    if (!out.empty()) out += ",";
    out += RoleName(r);
  }
  return out.empty() ? "none" : out;
}

StatusOr<AccessTokens> AccessTokens::Load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IOError("cannot read token file '" + path + "'");
  struct stat st {};
  // Anyone who can read the file can act as any principal in it. Group read is the documented
  // set-up (root owns it, fusord's group reads it: deploy/README.md); others, or a group that may
  // write it, are not.
  if (stat(path.c_str(), &st) == 0 && (st.st_mode & (S_IWGRP | S_IRWXO))) {
    spdlog::warn(
        "token file {} is {} (mode {:04o}); chmod 600 it, or 640 with a group only fusord's user "
        "is in",
        path, (st.st_mode & S_IRWXO) ? "open to others" : "writable by its group",
        st.st_mode & 07777);
  }
  std::stringstream text;
  text << in.rdbuf();
  return Parse(text.str(), path);
}

StatusOr<AccessTokens> AccessTokens::Parse(std::string_view text, std::string_view origin) {
  AccessTokens tokens;
  int line_no = 0;
  while (!text.empty()) {
    ++line_no;
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    std::string where = std::string(origin) + ":" + std::to_string(line_no);
    FUSOR_RETURN_IF_ERROR(tokens.AddLine(line, where));
  }
  if (tokens.by_digest_.empty()) {
    return Status::InvalidArgument(std::string(origin) +
                                   ": no tokens; expected lines 'TOKEN ROLES [NAME]'");
  }
  return tokens;
}

Status AccessTokens::AddLine(std::string_view line, std::string_view where) {
  std::vector<std::string_view> f = Fields(line);
  if (f.empty()) return Status::Ok();
  auto error = [&](const std::string& what) {
    return Status::InvalidArgument(std::string(where) + ": " + what);
  };
  if (f.size() < 2 || f.size() > 3) {
    return error("expected 'TOKEN ROLES [NAME]', got " + std::to_string(f.size()) + " fields");
  }
  if (f[0].size() < kMinTokenLength || !IsTokenText(f[0])) {
    return error("token must be at least " + std::to_string(kMinTokenLength) +
                 " printable characters (try `openssl rand -hex 32`)");
  }
  auto roles = ParseRoles(f[1]);
  if (!roles.ok()) return error(roles.status().message());
  Principal p{f.size() == 3 ? std::string(f[2]) : "token@" + std::string(where), *roles};
  if (!by_digest_.emplace(Digest(f[0]), std::move(p)).second) {
    return error("duplicate token");
  }
  return Status::Ok();
}

StatusOr<Principal> AccessTokens::Authenticate(std::string_view authorization) const {
  if (authorization.empty()) {
    return Status::Unauthenticated(
        "missing 'authorization: Bearer TOKEN' metadata; pass --token, --token-file or set "
        "FUSOR_TOKEN");
  }
  if (authorization.substr(0, kBearer.size()) != kBearer) {
    return Status::Unauthenticated("authorization metadata must be 'Bearer TOKEN'");
  }
  auto it = by_digest_.find(Digest(authorization.substr(kBearer.size())));
  if (it == by_digest_.end()) return Status::Unauthenticated("unknown token");
  return it->second;
}

Status Authorize(const Principal& who, Role needed, std::string_view method) {
  if ((who.roles & needed) || (who.roles & kRoleAdmin)) return Status::Ok();
  return Status::PermissionDenied(std::string(method) + " needs a token with the '" +
                                  std::string(RoleName(needed)) + "' role; '" + who.name +
                                  "' has " + RoleSetText(who.roles));
}

}  // namespace fusor
