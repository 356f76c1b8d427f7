#include "server/access_tokens.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <utility>

#include "tests/server/captured_log.h"
#include "tests/server/test_tokens.h"

namespace fusor {
namespace {

constexpr char kFile[] =
    "# build farm tokens\n"
    "\n"
    "aaaaaaaaaaaaaaaa1 read          dashboards\n"
    "bbbbbbbbbbbbbbbb2 read,tune     farm   # the CI runners\n"
    "cccccccccccccccc3 admin\r\n";

TEST(AccessTokens, ParsesRolesNamesAndComments) {
  auto t = AccessTokens::Parse(kFile, "tokens");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->size(), 3u);
  auto reader = t->Authenticate("Bearer aaaaaaaaaaaaaaaa1");
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ(reader->name, "dashboards");
  EXPECT_EQ(reader->roles, kRoleRead);
  auto farm = t->Authenticate("Bearer bbbbbbbbbbbbbbbb2");
  ASSERT_TRUE(farm.ok());
  EXPECT_EQ(farm->roles, kRoleRead | kRoleTune);
  auto admin = t->Authenticate("Bearer cccccccccccccccc3");
  ASSERT_TRUE(admin.ok());
  EXPECT_EQ(admin->name, "token@tokens:5");
  EXPECT_EQ(admin->roles, kAllRoles);
}

TEST(AccessTokens, AuthenticateFailures) {
  auto t = AccessTokens::Parse(kFile, "tokens");
  ASSERT_TRUE(t.ok());
  for (const char* bad : {"", "aaaaaaaaaaaaaaaa1", "Basic aaaaaaaaaaaaaaaa1", "Bearer ",
                          "Bearer aaaaaaaaaaaaaaaa", "Bearer  aaaaaaaaaaaaaaaa1"}) {
    auto p = t->Authenticate(bad);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_EQ(p.status().code(), Status::Code::kUnauthenticated) << bad;
  }
}

TEST(AccessTokens, BadFilesNameTheLine) {
  struct Case {
    const char* text;
    const char* expect;
  };
  for (const Case& c : {
           Case{"short read\n", "tokens:1: token must be at least 16"},
           Case{"aaaaaaaaaaaaaaaa1 read\naaaaaaaaaaaaaaaa1 tune\n", "tokens:2: duplicate token"},
           Case{"aaaaaaaaaaaaaaaa1 write\n", "tokens:1: unknown role 'write'"},
           Case{"aaaaaaaaaaaaaaaa1 read,\n", "tokens:1: unknown role ''"},
           Case{"aaaaaaaaaaaaaaaa1\n", "tokens:1: expected 'TOKEN ROLES [NAME]'"},
           Case{"aaaaaaaaaaaaaaaa1 read a b\n", "tokens:1: expected"},
           Case{"# nothing\n\n", "no tokens"},
       }) {
    auto t = AccessTokens::Parse(c.text, "tokens");
    ASSERT_FALSE(t.ok()) << c.text;
    EXPECT_EQ(t.status().code(), Status::Code::kInvalidArgument);
    EXPECT_NE(t.status().message().find(c.expect), std::string::npos) << t.status().message();
  }
}

TEST(AccessTokens, MissingFileIsAnError) {
  auto t = AccessTokens::Load("/nonexistent/fusord-tokens");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("/nonexistent/fusord-tokens"), std::string::npos);
}

// deploy/README.md installs the file 0640 root:fusor: no warning for that, one for a file others
// can read or its group can write.
TEST(AccessTokens, WarnsAboutAFileOthersCanReadNotTheDocumentedGroupRead) {
  auto dir = testing::TempDir("fusor-token-mode");
  const std::string path = testing::WriteTokenFile(dir);
  for (auto [mode, warns] : {std::pair{0600, false}, std::pair{0640, false}, std::pair{0644, true},
                             std::pair{0660, true}}) {
    std::filesystem::permissions(path, static_cast<std::filesystem::perms>(mode));
    testing::CapturedLog log;
    ASSERT_TRUE(AccessTokens::Load(path).ok());
    EXPECT_EQ(log.text().find("chmod 600") != std::string::npos, warns)
        << std::oct << mode << ": " << log.text();
  }
  std::filesystem::remove_all(dir);
}

TEST(Authorize, AdminImpliesEveryRole) {
  Principal admin{"op", kAllRoles};
  Principal farm{"farm", kRoleRead | kRoleTune};
  for (Role r : {kRoleRead, kRoleTune, kRoleAdmin}) EXPECT_TRUE(Authorize(admin, r, "X").ok());
  EXPECT_TRUE(Authorize(farm, kRoleTune, "Tune").ok());
  Status denied = Authorize(farm, kRoleAdmin, "Calibrate");
  EXPECT_EQ(denied.code(), Status::Code::kPermissionDenied);
  EXPECT_EQ(denied.message(),
            "Calibrate needs a token with the 'admin' role; 'farm' has read,tune");
}

TEST(Authorize, TheAgentRoleIsForMeasurementAgentsOnly) {
  auto t = AccessTokens::Parse("dddddddddddddddd4 agent build-07\n", "tokens");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  auto agent = t->Authenticate("Bearer dddddddddddddddd4");
  ASSERT_TRUE(agent.ok());
  EXPECT_EQ(agent->roles, kRoleAgent);
  EXPECT_TRUE(Authorize(*agent, kRoleAgent, "LeaseMeasurementJob").ok());
  Status denied = Authorize(*agent, kRoleTune, "Tune");
  EXPECT_EQ(denied.code(), Status::Code::kPermissionDenied);
  EXPECT_EQ(denied.message(), "Tune needs a token with the 'tune' role; 'build-07' has agent");
  EXPECT_TRUE(Authorize(Principal{"op", kAllRoles}, kRoleAgent, "RegisterAgent").ok());
}

}  // namespace
}  // namespace fusor
