// Tokens and temporary directories shared by the server tests: one token per role combination,
// written in fusord's token file format (server/access_tokens.h).
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace fusor::testing {

inline constexpr char kReadToken[] = "read-token-0123456789";
inline constexpr char kTuneToken[] = "tune-token-0123456789";
inline constexpr char kAdminToken[] = "admin-token-0123456789";
inline constexpr char kReadTuneToken[] = "readtune-token-0123456789";

inline std::filesystem::path TempDir(const std::string& stem) {
  auto dir = std::filesystem::temp_directory_path() /
             (stem + "-" + std::to_string(getpid()) + "-" + std::to_string(rand()));
  std::filesystem::create_directories(dir);
  return dir;
}

inline std::string WriteTokenFile(const std::filesystem::path& dir) {
  std::string path = (dir / "tokens").string();
  std::ofstream(path) << "# test tokens\n"
                      << kReadToken << " read reader\n"
                      << kTuneToken << " tune tuner\n"
                      << kAdminToken << " admin operator\n"
                      << kReadTuneToken << " read,tune farm\n";
  std::filesystem::permissions(
      path, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  return path;
}

}  // namespace fusor::testing
