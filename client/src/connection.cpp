#include "erg/client/connection.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace erg::client {
namespace {

// A daemon answer slower than this is treated as a failure (setters with block=true wait for
// the device; NVML calls take milliseconds).
constexpr int kReplyTimeoutMs = 30000;

bool send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

}  // namespace

Connection::~Connection() {
  if (fd_ >= 0) ::close(fd_);
}

std::string Connection::describe() const {
  if (!endpoint_.socket_path.empty()) return "ergd at " + endpoint_.socket_path;
  return "ergd at " + endpoint_.host + ":" + std::to_string(endpoint_.port);
}

Result<int> Connection::open() const {
  int fd = -1;
  int rc = -1;
  if (!endpoint_.socket_path.empty()) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (endpoint_.socket_path.size() >= sizeof addr.sun_path)
      return fail(ErrorCode::kInvalidArgument, "socket path too long: " + endpoint_.socket_path);
    std::memcpy(addr.sun_path, endpoint_.socket_path.c_str(), endpoint_.socket_path.size() + 1);
    fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0) rc = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  } else {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(endpoint_.port);
    if (::inet_pton(AF_INET, endpoint_.host.c_str(), &addr.sin_addr) != 1)
      return fail(ErrorCode::kInvalidArgument, "not an IPv4 address: " + endpoint_.host);
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0) {
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      rc = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    }
  }
  if (fd >= 0 && rc == 0) {
    timeval tv{kReplyTimeoutMs / 1000, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  if (fd < 0 || rc != 0) {
    int err = errno;
    if (fd >= 0) ::close(fd);
    ErrorCode code = err == EACCES ? ErrorCode::kNoPermission : ErrorCode::kUnavailable;
    return fail(code, "cannot connect to " + describe() + ": " + std::strerror(err) +
                          (err == EACCES ? " (ask for the socket's group, see docs/ergd.md)" : " (is ergd running?)"));
  }
  return fd;
}

Result<protocol::ParsedResponse> Connection::exchange(const std::string& wire) {
  if (!send_all(fd_, wire)) return fail(ErrorCode::kIo, "send to " + describe() + " failed");
  char chunk[16384];
  protocol::ParsedResponse resp;
  for (;;) {
    // Nothing to parse before the first bytes (the usual state: the previous reply was consumed).
    if (!buf_.empty()) {
      auto o = protocol::parse_response(buf_, resp);
      if (o.status == protocol::ParseStatus::kError)
        return fail(ErrorCode::kIo, "malformed reply from " + describe() + ": " + o.error_message);
      if (o.status == protocol::ParseStatus::kComplete) {
        if (resp.streaming) return fail(ErrorCode::kIo, "unexpected streaming reply from " + describe());
        buf_.erase(0, o.consumed);
        if (!resp.keep_alive) {
          ::close(fd_);
          fd_ = -1;
          buf_.clear();
        }
        return resp;
      }
    }
    ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);  // SO_RCVTIMEO bounds the wait
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return fail(ErrorCode::kTimeout, describe() + " did not answer");
    if (n <= 0) return fail(ErrorCode::kIo, describe() + " closed the connection");
    buf_.append(chunk, static_cast<std::size_t>(n));
  }
}

Result<protocol::ParsedResponse> Connection::request(std::string_view method, std::string_view target) {
  std::lock_guard lock(mutex_);
  // Built into a member so a keep-alive connection allocates nothing for the request line.
  std::string& wire = wire_;
  wire.clear();
  wire.append(method).append(" ").append(target).append(" HTTP/1.1\r\nHost: localhost\r\n");
  if (!endpoint_.token.empty()) wire.append("Authorization: Bearer ").append(endpoint_.token).append("\r\n");
  wire.append("\r\n");
  for (int attempt = 0; attempt < 2; ++attempt) {
    bool reused = fd_ >= 0;
    if (!reused) {
      auto fd = open();
      if (!fd) return fail(fd.error());
      fd_ = *fd;
      buf_.clear();
    }
    auto r = exchange(wire);
    if (r || !reused || r.error().code == ErrorCode::kTimeout) {
      if (!r && fd_ >= 0) {
        ::close(fd_);
        fd_ = -1;
      }
      return r;
    }
    // A kept-alive connection the daemon closed meanwhile: retry once on a fresh one.
    ::close(fd_);
    fd_ = -1;
  }
  return fail(ErrorCode::kIo, "unreachable");
}

Result<int> Connection::stream(std::string_view target, const std::function<bool(std::string_view)>& on_event) {
  auto fd = open();
  if (!fd) return fail(fd.error());
  std::string wire = "GET " + std::string(target) + " HTTP/1.1\r\nHost: localhost\r\n";
  if (!endpoint_.token.empty()) wire += "Authorization: Bearer " + endpoint_.token + "\r\n";
  wire += "\r\n";
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{*fd};
  if (!send_all(*fd, wire)) return fail(ErrorCode::kIo, "send to " + describe() + " failed");
  std::string buf;
  char chunk[4096];
  int status = 0;
  bool head = false;
  for (;;) {
    if (!head) {
      protocol::ParsedResponse resp;
      auto o = protocol::parse_response(buf, resp);
      if (o.status == protocol::ParseStatus::kError) return fail(ErrorCode::kIo, o.error_message);
      if (o.status == protocol::ParseStatus::kComplete) {
        status = resp.status;
        if (!resp.streaming) return status;
        head = true;
        buf.erase(0, o.consumed);
      }
    }
    if (head) {
      std::size_t end;
      while ((end = buf.find("\n\n")) != std::string::npos) {
        std::string_view event(buf.data(), end);
        if (event.substr(0, 6) == "data: ") {
          if (!on_event(event.substr(6))) return status;
        }
        buf.erase(0, end + 2);
      }
    }
    ssize_t n = ::recv(*fd, chunk, sizeof chunk, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return head ? Result<int>(status) : fail(ErrorCode::kIo, describe() + " closed the stream");
    buf.append(chunk, static_cast<std::size_t>(n));
  }
}

}  // namespace erg::client
