// Opening files that are not a usable tuning database: each gives a clear error naming the file,
// never a crash, and never changes the file (no silent downgrade or overwrite).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <iterator>

#include "db/schema.h"
#include "db/sqlite_plan_store.h"
#include "tests/db/test_db.h"

namespace fusor::db {
namespace {

using testing::Graph;
using testing::GraphHash;
using testing::Plan;
using testing::Profile;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// A closed database with enough rows to span many pages.
std::string MakeDatabase(const testing::TempDir& dir) {
  std::string path = dir.File("tuning.db");
  std::unique_ptr<SqlitePlanStore> store = testing::OpenWritable(path);
  EXPECT_TRUE(store->PutTarget(Profile("target-a", "cm1", 1)).ok());
  for (int i = 0; i < 60; ++i) {
    EXPECT_TRUE(store->PutPlan(Plan({.graph_hash = GraphHash(i)}), Graph("m", 40), {}).ok());
  }
  return path;
}

Status OpenStatus(const std::string& path, bool read_only) {
  SqliteOpenOptions options;
  options.read_only = read_only;
  return SqlitePlanStore::Open(path, options).status();
}

void ExpectErrorNamingFile(const Status& s, Status::Code code, const std::string& path) {
  EXPECT_EQ(s.code(), code) << s.ToString();
  EXPECT_NE(s.message().find(path), std::string::npos) << s.ToString();
}

TEST(DbOpenErrors, TextFileIsCorruptionAndStaysUntouched) {
  testing::TempDir dir;
  std::string path = dir.File("notes.db");
  std::string text = "these are my notes, not a database\n";
  for (int i = 0; i < 200; ++i) text += "line " + std::to_string(i) + "\n";
  WriteFile(path, text);
  for (bool read_only : {false, true}) {
    ExpectErrorNamingFile(OpenStatus(path, read_only), Status::Code::kCorruption, path);
  }
  EXPECT_EQ(ReadFile(path), text);
}

TEST(DbOpenErrors, DamagedHeaderIsCorruption) {
  testing::TempDir dir;
  std::string path = MakeDatabase(dir);
  std::string bytes = ReadFile(path);
  bytes.replace(0, 16, "Not SQLite here!");
  WriteFile(path, bytes);
  ExpectErrorNamingFile(OpenStatus(path, false), Status::Code::kCorruption, path);
}

TEST(DbOpenErrors, DamagedPagesAreCorruption) {
  testing::TempDir dir;
  std::string path = MakeDatabase(dir);
  std::string bytes = ReadFile(path);
  ASSERT_GT(bytes.size(), 8u * 4096);
  // Scribble over the b-tree pages after the first, leaving the header intact.
  for (size_t page = 1; page * 4096 < bytes.size(); ++page) {
    for (size_t i = 0; i < 64; ++i) bytes[page * 4096 + i] = static_cast<char>(0xA5 ^ i);
  }
  WriteFile(path, bytes);
  for (bool read_only : {false, true}) {
    ExpectErrorNamingFile(OpenStatus(path, read_only), Status::Code::kCorruption, path);
  }
}

TEST(DbOpenErrors, TruncatedFileIsCorruption) {
  testing::TempDir dir;
  std::string path = MakeDatabase(dir);
  std::string bytes = ReadFile(path);
  WriteFile(path, bytes.substr(0, bytes.size() / 2));
  ExpectErrorNamingFile(OpenStatus(path, false), Status::Code::kCorruption, path);
}

TEST(DbOpenErrors, NewerSchemaAsksToUpgradeFusor) {
  testing::TempDir dir;
  std::string path = MakeDatabase(dir);
  ASSERT_EQ(testing::RawQuery(path, "PRAGMA user_version = 99"), "");
  for (bool read_only : {false, true}) {
    Status s = OpenStatus(path, read_only);
    ExpectErrorNamingFile(s, Status::Code::kFailedPrecondition, path);
    EXPECT_NE(s.message().find("schema version 99"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("up to " + std::to_string(kSchemaVersion)), std::string::npos);
    EXPECT_NE(s.message().find("upgrade fusor"), std::string::npos);
  }
  EXPECT_EQ(testing::RawQuery(path, "PRAGMA user_version"), "99");  // Not downgraded.
}

TEST(DbOpenErrors, ReadOnlyFileCanBeQueriedButNotOpenedForWriting) {
  testing::TempDir dir;
  std::string path = MakeDatabase(dir);
  ASSERT_EQ(chmod(path.c_str(), 0444), 0);
  Status s = OpenStatus(path, false);
  ExpectErrorNamingFile(s, Status::Code::kFailedPrecondition, path);
  EXPECT_NE(s.message().find("read-only"), std::string::npos) << s.message();
  std::unique_ptr<SqlitePlanStore> reader = testing::OpenReadOnly(path);
  ASSERT_NE(reader, nullptr);
  StatusOr<std::vector<DatabaseStats>> stats = reader->Stats("");
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(stats->front().plans, 60);
}

TEST(DbOpenErrors, AnotherApplicationsDatabaseIsRefused) {
  testing::TempDir dir;
  std::string path = dir.File("other.db");
  ASSERT_EQ(testing::RawQuery(path, "CREATE TABLE songs (title TEXT)"), "");
  Status s = OpenStatus(path, false);
  ExpectErrorNamingFile(s, Status::Code::kFailedPrecondition, path);
  EXPECT_NE(s.message().find("not a Fusor tuning database"), std::string::npos) << s.message();
  EXPECT_EQ(testing::RawQuery(path, "SELECT count(*) FROM sqlite_schema"), "1");
}

TEST(DbOpenErrors, MissingFileOrDirectory) {
  testing::TempDir dir;
  ExpectErrorNamingFile(OpenStatus(dir.File("absent.db"), true), Status::Code::kNotFound,
                        dir.File("absent.db"));
  ExpectErrorNamingFile(OpenStatus(dir.File("no/such/dir/t.db"), false), Status::Code::kNotFound,
                        dir.File("no/such/dir/t.db"));
  EXPECT_EQ(OpenStatus(dir.path(), false).code(), Status::Code::kInvalidArgument);
}

TEST(DbOpenErrors, EmptyFileOpenedReadOnlyIsNotADatabaseYet) {
  testing::TempDir dir;
  std::string path = dir.File("empty.db");
  WriteFile(path, "");
  EXPECT_EQ(OpenStatus(path, true).code(), Status::Code::kFailedPrecondition);
  EXPECT_TRUE(OpenStatus(path, false).ok());  // Writable: it becomes a new database.
}

// The database holds every tuned model's structure: a new one, and the files SQLite makes beside
// it, are the owner's alone, whatever the umask.
TEST(DbOpenErrors, ANewDatabaseAndItsWalAreOwnerOnly) {
  testing::TempDir dir;
  std::string path = dir.File("tuning.db");
  mode_t old_umask = umask(022);
  {
    std::unique_ptr<SqlitePlanStore> store = testing::OpenWritable(path);
    ASSERT_TRUE(store->PutTarget(Profile("target-a", "cm1", 1)).ok());
    for (const std::string& p : {path, path + "-wal", path + "-shm"}) {
      struct stat st {};
      ASSERT_EQ(stat(p.c_str(), &st), 0) << p;
      EXPECT_EQ(st.st_mode & 0777, 0600u) << p;
    }
  }
  umask(old_umask);
}

}  // namespace
}  // namespace fusor::db
