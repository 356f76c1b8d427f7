// `fusor plan show --svg PATH` renders with `dot` run from an argument vector: a path is a file
// name whatever it holds.
#include "client/graphviz.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace fusor {
namespace {

namespace fs = std::filesystem;

class Graphviz : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("fusor_graphviz_test_" +
            std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

constexpr char kSource[] = "digraph plan { a -> b; }\n";

TEST_F(Graphviz, APathWithQuotesAndCommandSubstitutionIsOnlyAFileName) {
  // Run in dir_: a shell running any part of the name would create dir_/ran.
  const std::string name = "it's \"$(touch ran)\" `touch ran`; touch ran '.svg";
  const fs::path cwd = fs::current_path();
  fs::current_path(dir_);
  Status s = RenderSvg(kSource, name);
  fs::current_path(cwd);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(fs::exists(dir_ / name)) << name;
  EXPECT_FALSE(fs::exists(dir_ / "ran")) << "a shell ran part of the path";
  std::ifstream in(dir_ / name);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("<svg"), std::string::npos);
}

TEST_F(Graphviz, APathStartingWithADashIsAnOutputFileNotAnOption) {
  const fs::path cwd = fs::current_path();
  fs::current_path(dir_);
  Status s = RenderSvg(kSource, "-V.svg");
  fs::current_path(cwd);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(fs::exists(dir_ / "-V.svg"));
}

TEST_F(Graphviz, AnUnwritablePathIsAnErrorNamingIt) {
  const std::string path = (dir_ / "no" / "such" / "dir.svg").string();
  Status s = RenderSvg(kSource, path);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
}

}  // namespace
}  // namespace fusor
