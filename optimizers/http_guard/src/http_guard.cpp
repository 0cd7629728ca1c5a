#include "erg/optimizers/http_guard.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <httplib.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/sha.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "erg/optimizers/guarded_server.hpp"

namespace erg::http_guard {
namespace {

// cpp-httplib 0.11.4 holds set_payload_max_length to a Content-Length only: it reads a chunked
// body (Transfer-Encoding) whole, reads a POST/PUT/PATCH body without Content-Length until the
// client closes, and inflates a gzip/deflate/br body (Content-Encoding) without a limit, all into
// memory. Its pre-routing handler runs once the headers are read and before any of the body is
// (Server::routing), so such requests are refused there; the unread body would otherwise be
// parsed as the connection's next requests, so the connection is then ended.

/// The request the pre-routing handler refused last on this worker thread; httplib calls the
/// logger on the same thread once the answer is written.
thread_local const httplib::Request* refused_request = nullptr;

/// 411 or 415 and why, for a request whose body httplib would read past `max_body` bytes.
std::optional<std::pair<int, std::string>> unbounded_body(const httplib::Request& req, std::size_t max_body) {
  const std::string limit = " (at most " + std::to_string(max_body) + " bytes)";
  if (req.has_header("Transfer-Encoding"))
    return std::pair{411, "chunked request bodies are not accepted; send Content-Length" + limit};
  const bool has_body = req.method == "POST" || req.method == "PUT" || req.method == "PATCH" || req.method == "PRI";
  if (has_body && !req.has_header("Content-Length"))
    return std::pair{411, "a request body needs Content-Length" + limit};
  const auto encodings = req.get_header_value_count("Content-Encoding");
  if (encodings > 1 ||
      (encodings == 1 && strcasecmp(req.get_header_value("Content-Encoding").c_str(), "identity") != 0))
    return std::pair{
        415, "compressed request bodies are not accepted; send the body uncompressed with Content-Length" + limit};
  return std::nullopt;
}

/// The descriptor of the TCP connection `req` came on: the socket whose local and peer addresses
/// are the request's (httplib 0.11.4 gives handlers no socket); -1 if none is.
int connection_socket(const httplib::Request& req) {
  auto address = [](const sockaddr_storage& a, socklen_t n, std::string& ip, int& port) {
    if (a.ss_family == AF_INET) {
      port = ntohs(reinterpret_cast<const sockaddr_in*>(&a)->sin_port);
    } else if (a.ss_family == AF_INET6) {
      port = ntohs(reinterpret_cast<const sockaddr_in6*>(&a)->sin6_port);
    } else {
      return false;
    }
    char host[NI_MAXHOST];
    if (getnameinfo(reinterpret_cast<const sockaddr*>(&a), n, host, sizeof host, nullptr, 0, NI_NUMERICHOST) != 0)
      return false;
    ip = host;
    return true;
  };
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end; it.increment(ec)) {
    int fd = -1;
    const auto name = it->path().filename().string();
    if (std::from_chars(name.data(), name.data() + name.size(), fd).ec != std::errc{}) continue;
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    sockaddr_storage local{}, peer{};
    socklen_t local_n = sizeof local, peer_n = sizeof peer;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_n) != 0 ||
        getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_n) != 0)
      continue;
    std::string local_ip, peer_ip;
    int local_port = -1, peer_port = -1;
    if (address(local, local_n, local_ip, local_port) && address(peer, peer_n, peer_ip, peer_port) &&
        local_ip == req.local_addr && local_port == req.local_port && peer_ip == req.remote_addr &&
        peer_port == req.remote_port)
      return fd;
  }
  return -1;
}

}  // namespace

void refuse_unbounded_bodies(httplib::Server& s, std::size_t max_body) {
  s.set_pre_routing_handler([max_body](const httplib::Request& req, httplib::Response& res) {
    refused_request = nullptr;
    std::optional<std::pair<int, std::string>> why;
    if (req.remote_port < 0 && !current_peer()) {
      // What httplib still parses from its buffer of a connection ended below has no peer. (A
      // GuardedServer ends its connections itself; its Unix-socket peers have no port.)
      why = std::pair{400, std::string("the connection was closed")};
    } else {
      why = unbounded_body(req, max_body);
    }
    if (!why) return httplib::Server::HandlerResponse::Unhandled;
    res.status = why->first;
    res.set_header("Connection", "close");
    res.set_content(R"({"message":")" + why->second + "\"}", "application/json");
    refused_request = &req;
    return httplib::Server::HandlerResponse::Handled;
  });
  // The logger runs after the answer went out (Server::write_response_core). The socket is
  // replaced by /dev/null: that closes the connection (unread bytes make the kernel reset it,
  // which stops the client sending), and httplib's next read of the descriptor fails, so it
  // leaves the connection and closes the descriptor itself, without parsing the rest.
  s.set_logger([](const httplib::Request& req, const httplib::Response&) {
    if (&req != refused_request) return;
    refused_request = nullptr;
    if (current_peer()) {  // a GuardedServer connection: it ends once this answer is out
      end_connection_after_reply();
      return;
    }
    const int fd = connection_socket(req);
    if (fd < 0) return;  // httplib ends the connection after at most its keep-alive count
    const int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null < 0) return;
    dup3(null, fd, O_CLOEXEC);
    close(null);
  });
}

std::string random_hex(std::size_t bytes) {
  std::vector<unsigned char> raw(bytes);
  std::size_t got = 0;
  while (got < bytes) {
    const ssize_t n = getrandom(raw.data() + got, bytes - got, 0);
    if (n > 0)
      got += static_cast<std::size_t>(n);
    else if (errno != EINTR)
      throw std::system_error(errno, std::generic_category(), "getrandom");
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes);
  for (unsigned char b : raw) {
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 15]);
  }
  return out;
}

std::string sha256_hex(std::string_view text) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : digest) {
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 15]);
  }
  return out;
}

bool same_secret(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace erg::http_guard
