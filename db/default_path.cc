#include "db/default_path.h"

#include <cstdlib>
#include <filesystem>

#include <spdlog/fmt/fmt.h>

namespace fusor::db {

StatusOr<std::string> DefaultDatabasePath(bool create_directories) {
  std::filesystem::path data_home;
  const char* xdg = std::getenv("XDG_DATA_HOME");
  if (xdg != nullptr && std::filesystem::path(xdg).is_absolute()) {
    data_home = xdg;
  } else {
    const char* home = std::getenv("HOME");
    if (home == nullptr || *home == '\0') {
      return Status::FailedPrecondition(
          "neither XDG_DATA_HOME nor HOME is set, so there is no default tuning database; pass "
          "--db PATH");
    }
    data_home = std::filesystem::path(home) / ".local" / "share";
  }
  std::filesystem::path dir = data_home / "fusor";
  if (create_directories) {
    std::error_code ec;
    // Owner-only when Fusor creates it: the database holds every model's structure.
    if (std::filesystem::create_directories(dir, ec) && !ec) {
      std::filesystem::permissions(dir, std::filesystem::perms::owner_all,
                                   std::filesystem::perm_options::replace, ec);
    }
    if (ec) {
      return Status::IOError(fmt::format("cannot create directory '{}' for the tuning database: {}",
                                         dir.string(), ec.message()));
    }
  }
  return (dir / "tuning.db").string();
}

}  // namespace fusor::db
