// SqlitePlanStore::LockPlanKey: an open-file-description lock on one byte of the file beside the
// database, so fusord processes sharing one file search one plan key once.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include <spdlog/fmt/fmt.h>

#include "db/sqlite_plan_store.h"
#include "db/store_rules.h"

namespace fusor::db {

namespace {

// Holds an open-file-description lock; closing the descriptor releases it.
class FileRangeLock final : public PlanKeyLock {
 public:
  explicit FileRangeLock(int fd) : fd_(fd) {}
  ~FileRangeLock() override { close(fd_); }

 private:
  int fd_;
};

}  // namespace

StatusOr<std::unique_ptr<PlanKeyLock>> SqlitePlanStore::LockPlanKey(
    const PlanKey& key, const std::atomic<bool>* cancelled) {
  if (read_only()) {
    return Status::FailedPrecondition(
        fmt::format("database '{}' is open read-only; it takes no tuning locks", path_));
  }
  std::string lock_path = path_ + "-tunelock";
  int fd = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    return Status::IOError(
        fmt::format("cannot open the tuning lock file '{}': {}", lock_path, std::strerror(errno)));
  }
  struct flock range {};
  range.l_type = F_WRLCK;
  range.l_whence = SEEK_SET;
  range.l_start = static_cast<off_t>(PlanKeyLockId(key));
  range.l_len = 1;
  // Polled rather than waited for (F_OFD_SETLKW), so a cancelled wait ends promptly.
  while (fcntl(fd, F_OFD_SETLK, &range) != 0) {
    if (errno != EAGAIN && errno != EACCES && errno != EINTR) {
      Status s = Status::IOError(fmt::format("cannot lock the tuning lock file '{}': {}", lock_path,
                                             std::strerror(errno)));
      close(fd);
      return s;
    }
    if (cancelled != nullptr && cancelled->load()) {
      close(fd);
      return Status::Cancelled("cancelled while another process tuned the same graph");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return std::unique_ptr<PlanKeyLock>(std::make_unique<FileRangeLock>(fd));
}

}  // namespace fusor::db
