#include "erg/core/file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace erg {

Result<void> write_file_atomic(const std::filesystem::path& path, const std::string& content, unsigned mode,
                               bool sync) {
  static std::atomic<unsigned> counter{0};
  std::filesystem::path tmp = path;
  tmp += ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1));
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return fail(ErrorCode::kIo, "cannot write " + path.string() + ": " + std::strerror(errno));
  ::fchmod(fd, mode);
  auto give_up = [&](int e) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return fail(ErrorCode::kIo, "cannot write " + path.string() + ": " + std::strerror(e));
  };
  const char* p = content.data();
  std::size_t left = content.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return give_up(errno);
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  if (sync && ::fsync(fd) != 0) return give_up(errno);
  if (::close(fd) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    return fail(ErrorCode::kIo, "cannot write " + path.string() + ": " + std::strerror(e));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    return fail(ErrorCode::kIo, "cannot write " + path.string() + ": " + std::strerror(e));
  }
  return ok();
}

}  // namespace erg
