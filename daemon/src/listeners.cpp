#include "listeners.hpp"

#include <arpa/inet.h>
#include <grp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <vector>

namespace erg::daemon {
namespace {

/// listen(2)'s backlog: the kernel caps it at net.core.somaxconn (4096 since Linux 5.4). A
/// connect flood must not fill it before the accept loop drains it (a full backlog refuses
/// every user's connect, not the flooder's).
constexpr int kListenBacklog = 4096;

std::string errno_text(int err) { return std::strerror(err); }

std::string mode_text(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

/// `dir` and every directory above it, `dir` first.
std::vector<std::filesystem::path> with_ancestors(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> out;
  for (auto p = dir; !p.empty(); p = p.parent_path()) {
    out.push_back(p);
    if (p == p.root_path()) break;
  }
  return out;
}

/// The socket's directory must already exist: creating it would leave root-owned directories
/// wherever a mistyped --socket-path points (the systemd unit's RuntimeDirectory= makes
/// /run/ergd). Then, as ssh's StrictModes: whoever may write to the directory, or to one above
/// it, can put their own socket where ergd's clients look for ergd's and receive their
/// requests (root's included). So the directory and its ancestors must be owned by root or by
/// ergd's euid, and none may be writable by group or others unless sticky (a sticky directory
/// lets no one else rename or remove entries owned by root or ergd). The socket's own directory
/// may not be writable by others even when sticky (another user could take the socket's name
/// while ergd is not running), unless `allow_insecure` (then a warning is returned). Both the
/// path as given and its resolved form (symlinks followed) are checked.
Result<std::optional<std::string>> check_socket_directory(const std::string& path, bool allow_insecure) {
  namespace fs = std::filesystem;
  fs::path parent = fs::path(path).parent_path();
  if (parent.empty()) parent = ".";  // relative to the working directory
  struct stat st {};
  if (::stat(parent.c_str(), &st) != 0) {
    int err = errno;
    if (err == ENOENT || err == ENOTDIR)
      return fail(ErrorCode::kNotFound, "cannot create socket " + path + ": directory " + parent.string() +
                                            " does not exist (ergd does not create it; create it first, e.g. "
                                            "systemd's RuntimeDirectory=ergd)");
    return std::optional<std::string>();  // EACCES and the like: bind reports them with the socket's path
  }
  if (!S_ISDIR(st.st_mode))
    return fail(ErrorCode::kNotFound, "cannot create socket " + path + ": " + parent.string() + " is not a directory");

  std::error_code ec;
  fs::path given = fs::absolute(parent, ec).lexically_normal();
  if (!given.has_filename() && given != given.root_path()) given = given.parent_path();  // "/cwd/." → "/cwd/"
  fs::path resolved = fs::canonical(parent, ec);
  std::vector<fs::path> dirs = with_ancestors(given);
  if (!ec)
    for (auto& d : with_ancestors(resolved))
      if (std::find(dirs.begin(), dirs.end(), d) == dirs.end()) dirs.push_back(d);
  const uid_t me = ::geteuid();
  std::optional<std::string> warning;
  const std::string fix =
      "use a directory only root (or ergd's user) can write to, e.g. /run/ergd "
      "(systemd's RuntimeDirectory=ergd)";
  for (const auto& d : dirs) {
    struct stat ds {};
    if (::stat(d.c_str(), &ds) != 0) continue;  // unreadable: bind decides
    const bool own = d == given || d == resolved;
    const std::string what =
        own ? "socket directory " + d.string() : d.string() + " (above socket directory " + parent.string() + ")";
    if (ds.st_uid != 0 && ds.st_uid != me)
      return fail(ErrorCode::kNoPermission, "refusing socket " + path + ": " + what + " is owned by uid " +
                                                std::to_string(ds.st_uid) +
                                                ", who could replace ergd's socket with their own; " + fix);
    if ((ds.st_mode & (S_IWGRP | S_IWOTH)) == 0) continue;
    if ((ds.st_mode & S_ISVTX) == 0)
      return fail(ErrorCode::kNoPermission, "refusing socket " + path + ": " + what + " (mode " +
                                                mode_text(ds.st_mode) +
                                                ") is writable by other users, who could replace ergd's socket "
                                                "with their own; chmod go-w " +
                                                d.string() + ", or " + fix);
    if (!own) continue;  // a sticky ancestor (/tmp): no one else can rename the directory below it
    const std::string risk = "socket directory " + d.string() + " (mode " + mode_text(ds.st_mode) +
                             ") is writable by other users: one could take the socket's name while ergd is not "
                             "running and receive its clients' requests";
    if (!allow_insecure)
      return fail(ErrorCode::kNoPermission,
                  "refusing socket " + path + ": " + risk + "; " + fix + ", or pass --allow-insecure-socket-dir");
    warning = risk + " (allowed by --allow-insecure-socket-dir)";
  }
  return warning;
}

/// chgrp of the bound socket to `group` (a name or a numeric gid).
Result<void> set_group(const std::string& path, const std::string& group) {
  gid_t gid = 0;
  auto r = std::from_chars(group.data(), group.data() + group.size(), gid);
  if (r.ec != std::errc() || r.ptr != group.data() + group.size()) {
    struct group* gr = ::getgrnam(group.c_str());
    if (gr == nullptr) return fail(ErrorCode::kNotFound, "unknown --socket-group '" + group + "'");
    gid = gr->gr_gid;
  }
  if (::chown(path.c_str(), static_cast<uid_t>(-1), gid) != 0)
    return fail(ErrorCode::kNoPermission, "cannot chgrp " + path + ": " + errno_text(errno));
  return ok();
}

}  // namespace

Result<int> listen_unix(const Config& config, std::optional<std::string>& warning) {
  const std::string& path = config.socket_path;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path)
    return fail(ErrorCode::kInvalidArgument, "socket path too long (max 107 bytes): " + path);
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  auto checked = check_socket_directory(path, config.allow_insecure_socket_dir);
  if (!checked) return fail(checked.error());
  warning = std::move(*checked);

  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode))
      return fail(ErrorCode::kAlreadyExists, path + " exists and is not a socket; refusing to replace it");
    // Stale only if nobody accepts on it (zeusd's rule).
    int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int rc = ::connect(probe, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    int err = errno;
    ::close(probe);
    if (rc == 0) return fail(ErrorCode::kAlreadyExists, "another daemon is already listening on " + path);
    if (err != ECONNREFUSED && err != ENOENT)
      return fail(ErrorCode::kIo, "cannot probe existing socket " + path + ": " + errno_text(err));
    ::unlink(path.c_str());
  }
  // Non-blocking: the accept loop polls, and a client that left the backlog must not block it.
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return fail(ErrorCode::kIo, "socket(AF_UNIX): " + errno_text(errno));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    int err = errno;
    ::close(fd);
    return fail(err == EACCES ? ErrorCode::kNoPermission : ErrorCode::kIo,
                "cannot bind " + path + ": " + errno_text(err));
  }
  auto give_up = [&](const Error& e) -> Result<int> {
    ::close(fd);
    ::unlink(path.c_str());
    return fail(e);
  };
  if (config.socket_group)
    if (auto r = set_group(path, *config.socket_group); !r) return give_up(r.error());
  if (::chmod(path.c_str(), config.socket_mode) != 0 || ::listen(fd, kListenBacklog) != 0)
    return give_up(Error{ErrorCode::kIo, "cannot listen on " + path + ": " + errno_text(errno)});
  return fd;
}

Result<int> listen_tcp(const std::string& spec, std::uint16_t& port) {
  std::size_t colon = spec.rfind(':');
  if (colon == std::string::npos) return fail(ErrorCode::kInvalidArgument, "--tcp needs HOST:PORT, got '" + spec + "'");
  std::string host = spec.substr(0, colon);
  unsigned number = 0;
  auto r = std::from_chars(spec.data() + colon + 1, spec.data() + spec.size(), number);
  if (r.ec != std::errc() || r.ptr != spec.data() + spec.size() || number > 65535)
    return fail(ErrorCode::kInvalidArgument, "--tcp: invalid port in '" + spec + "'");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(number));
  if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1)
    return fail(ErrorCode::kInvalidArgument, "--tcp: '" + host + "' is not an IPv4 address");
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return fail(ErrorCode::kIo, "socket(AF_INET): " + errno_text(errno));
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, kListenBacklog) != 0) {
    int err = errno;
    ::close(fd);
    return fail(ErrorCode::kIo, "cannot listen on " + spec + ": " + errno_text(err));
  }
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  port = ntohs(addr.sin_port);
  return fd;
}

}  // namespace erg::daemon
