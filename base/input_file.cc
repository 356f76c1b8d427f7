#include "base/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace fusor {
namespace {

std::string Named(std::string_view what, const std::string& path) {
  return std::string(what) + " '" + path + "'";
}

std::string KindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  return "not a regular file";
}

// Closes the descriptor on every return path.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Opens without blocking (a FIFO with no writer would block a plain open) and checks that the
// path is a regular file; *size is its size.
StatusOr<int> OpenRegular(const std::string& path, std::string_view what, int64_t* size) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT || err == ENOTDIR)
      return Status::NotFound(Named(what, path) + " does not exist");
    return Status::IOError("cannot open " + Named(what, path) + ": " + std::strerror(err));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    std::string kind = KindOf(st.st_mode);
    ::close(fd);
    return Status::FailedPrecondition(Named(what, path) + " is " + kind + ", not a regular file");
  }
  *size = static_cast<int64_t>(st.st_size);
  return fd;
}

Status ReadFully(int fd, const std::string& path, std::string_view what, int64_t offset,
                 std::string* out) {
  size_t done = 0;
  while (done < out->size()) {
    ssize_t n = ::pread(fd, out->data() + done, out->size() - done,
                        static_cast<off_t>(offset + static_cast<int64_t>(done)));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      return Status::IOError("cannot read " + Named(what, path) + ": " + std::strerror(errno));
    if (n == 0) return Status::IOError(Named(what, path) + " shrank while it was read");
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::string> ReadInputFile(const std::string& path, std::string_view what,
                                    int64_t max_bytes) {
  int64_t size = 0;
  FUSOR_ASSIGN_OR_RETURN(int raw, OpenRegular(path, what, &size));
  Fd fd(raw);
  if (size > max_bytes) {
    return Status::InvalidArgument(Named(what, path) + " is " + std::to_string(size) +
                                   " bytes; the limit is " + std::to_string(max_bytes));
  }
  std::string bytes(static_cast<size_t>(size), '\0');
  FUSOR_RETURN_IF_ERROR(ReadFully(fd.get(), path, what, 0, &bytes));
  return bytes;
}

StatusOr<std::string> ReadInputFileRange(const std::string& path, std::string_view what,
                                         int64_t offset, int64_t length) {
  int64_t size = 0;
  FUSOR_ASSIGN_OR_RETURN(int raw, OpenRegular(path, what, &size));
  Fd fd(raw);
  if (offset < 0 || length < 0 || offset > size || length > size - offset) {
    return Status::InvalidArgument(Named(what, path) + " holds " + std::to_string(size) +
                                   " bytes; offset " + std::to_string(offset) + " plus " +
                                   std::to_string(length) + " bytes pass its end");
  }
  std::string bytes(static_cast<size_t>(length), '\0');
  FUSOR_RETURN_IF_ERROR(ReadFully(fd.get(), path, what, offset, &bytes));
  return bytes;
}

}  // namespace fusor
