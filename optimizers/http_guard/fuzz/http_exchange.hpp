#pragma once
// Shared by the libFuzzer targets over a GuardedServer's whole connection loop (bso_http_fuzz,
// perseus_http_fuzz): a client thread that writes an input into one end of a socket pair while
// draining the replies, and a strict reader of what the server wrote. The fuzzing thread serves
// the other end with the server's serve_socket(fd), as a connection thread serves an accepted
// connection (admission, keep-alive, whole-request deadline, head bound, lingering close).

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace erg::http_fuzz {

/// Prints what broke and the server's whole output, then aborts (libFuzzer reports a crash).
[[noreturn]] inline void violated(const std::string& what, std::string_view out) {
  std::fprintf(stderr, "http fuzz: %s\n--- the server wrote %zu bytes:\n%.*s\n---\n", what.c_str(), out.size(),
               static_cast<int>(std::min<std::size_t>(out.size(), 4096)), out.data());
  std::abort();
}

/// Writes `input` into `fd` (non-blocking) while reading everything the server sends, until the
/// server closes its end; shuts the write side once the input is sent, which ends the server's
/// keep-alive loop (or its lingering close).
inline std::string exchange(int fd, std::string_view input) {
  std::string out;
  std::size_t sent = 0;
  bool shut = false;
  char buf[16384];
  for (;;) {
    if (!shut && sent == input.size()) {
      ::shutdown(fd, SHUT_WR);
      shut = true;
    }
    pollfd p{fd, static_cast<short>(POLLIN | (sent < input.size() ? POLLOUT : 0)), 0};
    if (::poll(&p, 1, -1) < 0 && errno != EINTR) break;
    if ((p.revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
      if (n == 0) break;  // the server closed its end
      if (n > 0) out.append(buf, static_cast<std::size_t>(n));
      if (n < 0 && errno != EAGAIN && errno != EINTR) break;
    }
    if ((p.revents & POLLOUT) != 0 && sent < input.size()) {
      const ssize_t n = ::send(fd, input.data() + sent, input.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) sent += static_cast<std::size_t>(n);
      if (n < 0 && errno != EAGAIN && errno != EINTR) sent = input.size();  // the server stopped reading
    }
  }
  return out;
}

/// The client's side on a thread kept for the whole run (a thread per input costs more than
/// most inputs do).
class ClientThread {
 public:
  ClientThread() : thread_([this] { run(); }) {}
  ~ClientThread() {
    {
      std::lock_guard lock(mutex_);
      quit_ = true;
      cv_.notify_all();
    }
    thread_.join();
  }
  ClientThread(const ClientThread&) = delete;
  ClientThread& operator=(const ClientThread&) = delete;
  /// Serves `input` through `fd` on the client thread; finish() returns what the server wrote.
  void start(int fd, std::string_view input) {
    std::lock_guard lock(mutex_);
    fd_ = fd;
    input_ = input;
    done_ = false;
    cv_.notify_all();
  }
  std::string finish() {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [this] { return done_; });
    return std::move(out_);
  }

 private:
  void run() {
    std::unique_lock lock(mutex_);
    for (;;) {
      cv_.wait(lock, [this] { return fd_ >= 0 || quit_; });
      if (quit_) return;
      const int fd = fd_;
      const std::string_view input = input_;
      lock.unlock();
      std::string out = exchange(fd, input);
      lock.lock();
      out_ = std::move(out);
      fd_ = -1;
      done_ = true;
      cv_.notify_all();
    }
  }
  std::mutex mutex_;
  std::condition_variable cv_;
  int fd_ = -1;
  std::string_view input_;
  std::string out_;
  bool done_ = true;
  bool quit_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

/// Between two connections' bytes in an input: the fuzzers serve each part as its own
/// connection, one after the other (httplib ends a connection after 5 requests, and a job's
/// rounds take more).
inline constexpr std::string_view kNextConnection = "--next-connection--\r\n";

/// `input` split at kNextConnection into at most `most` connections (the last takes the rest).
inline std::vector<std::string_view> split_connections(std::string_view input, std::size_t most = 16) {
  std::vector<std::string_view> parts;
  for (;;) {
    const std::size_t at = parts.size() + 1 < most ? input.find(kNextConnection) : std::string_view::npos;
    if (at == std::string_view::npos) {
      parts.push_back(input);
      return parts;
    }
    parts.push_back(input.substr(0, at));
    input.remove_prefix(at + kNextConnection.size());
  }
}

/// Sends `input` as one client connection over a Unix socket pair while `serve` serves the
/// other end on the calling thread (and closes it); what the server wrote.
inline std::string serve_input(ClientThread& client, std::string_view input, const std::function<void(int)>& serve) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) std::abort();
  ::fcntl(sv[0], F_SETFL, O_NONBLOCK);
  client.start(sv[0], input);
  serve(sv[1]);  // returns once the connection loop ended; it closes sv[1]
  std::string out = client.finish();
  ::close(sv[0]);
  return out;
}

/// One response as the server wrote it.
struct Response {
  int status = 0;
  std::string_view body;
  bool has_body = true;       ///< False for 1xx and for an answer to HEAD.
  bool encoded = false;       ///< A Content-Encoding other than identity.
  bool partial = false;       ///< Slices of the body (a Range request): 206, Content-Range, multipart.
  bool json_content = false;  ///< Content-Type application/json.
};

inline std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

/// Splits what the server wrote into HTTP/1.1 responses; a violation unless all of it is a
/// sequence of complete ones: a status line "HTTP/1.1 NNN reason", headers "Name: value", and
/// (but for 1xx) exactly one Content-Length that the body matches, no Transfer-Encoding. An
/// answer to HEAD carries no body: one may lack its body when `input` holds a HEAD request and
/// what follows its head is the next response or the end.
inline std::vector<Response> parse_responses(std::string_view out, std::string_view input) {
  const bool head_sent = input.find("HEAD") != std::string_view::npos;
  std::vector<Response> all;
  std::string_view rest = out;
  while (!rest.empty()) {
    const std::size_t end = rest.find("\r\n\r\n");
    if (end == std::string_view::npos) violated("a response's head is incomplete", out);
    const std::string_view head = rest.substr(0, end + 2);
    rest.remove_prefix(end + 4);
    Response r;
    const std::size_t line_end = head.find("\r\n");
    const std::string_view status_line = head.substr(0, line_end);
    if (status_line.size() < 13 || status_line.substr(0, 9) != "HTTP/1.1 " || status_line[12] != ' ')
      violated("bad status line: " + std::string(status_line), out);
    for (std::size_t i = 9; i < 12; ++i)
      if (status_line[i] < '0' || status_line[i] > '9') violated("bad status: " + std::string(status_line), out);
    r.status = std::stoi(std::string(status_line.substr(9, 3)));
    if (r.status < 100 || r.status > 599) violated("bad status: " + std::string(status_line), out);
    std::optional<std::size_t> length;
    std::string_view headers = head.substr(line_end + 2);
    while (!headers.empty()) {
      const std::size_t eol = headers.find("\r\n");
      const std::string_view line = headers.substr(0, eol);
      headers.remove_prefix(eol + 2);
      const std::size_t colon = line.find(':');
      if (colon == 0 || colon == std::string_view::npos || line.find_first_of(" \t") < colon)
        violated("bad header line: " + std::string(line), out);
      const std::string name = lower(line.substr(0, colon));
      std::string_view value = line.substr(colon + 1);
      while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
      if (value.find_first_of("\r\n") != std::string_view::npos) violated("a header holds CR or LF", out);
      if (name == "content-length") {
        if (length) violated("two Content-Length headers", out);
        if (value.empty() || value.size() > 9 || value.find_first_not_of("0123456789") != std::string_view::npos)
          violated("bad Content-Length: " + std::string(value), out);
        length = static_cast<std::size_t>(std::stoul(std::string(value)));
      } else if (name == "transfer-encoding") {
        violated("a response with Transfer-Encoding", out);
      } else if (name == "content-encoding") {
        r.encoded = lower(value) != "identity";
      } else if (name == "content-range") {
        r.partial = true;
      } else if (name == "content-type") {
        r.json_content = lower(value).starts_with("application/json");
        if (lower(value).starts_with("multipart/byteranges")) r.partial = true;
      }
    }
    if (r.status == 206) r.partial = true;
    if (r.status < 200) {
      r.has_body = false;
      if (length && *length != 0) violated("a 1xx response with a body", out);
    } else {
      if (!length) violated("a response without Content-Length", out);
      if (head_sent && (rest.empty() || rest.starts_with("HTTP/1.1 "))) {
        r.has_body = false;  // an answer to HEAD
      } else {
        if (rest.size() < *length)
          violated("a body shorter than its Content-Length (" + std::to_string(rest.size()) + " < " +
                       std::to_string(*length) + ")",
                   out);
        r.body = rest.substr(0, *length);
        rest.remove_prefix(*length);
      }
    }
    all.push_back(r);
  }
  return all;
}

/// A 4xx/5xx answer's body: a JSON object with a string "message" or FastAPI's "detail".
inline bool is_error_body(const nlohmann::json& j) {
  if (!j.is_object()) return false;
  if (j.contains("message")) return j["message"].is_string();
  return j.contains("detail") && (j["detail"].is_string() || j["detail"].is_array());
}

/// The JSON of `r`'s body when it is to be checked: a whole (not a Range slice), unencoded body
/// of a final answer; nullopt otherwise. A violation when it should be JSON and is not.
inline std::optional<nlohmann::json> json_body(const Response& r, std::string_view out) {
  if (!r.has_body || r.encoded || r.partial || r.status < 200) return std::nullopt;
  if (!r.json_content) violated("an answer that is not application/json: " + std::to_string(r.status), out);
  nlohmann::json j = nlohmann::json::parse(r.body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) violated("an answer whose body is not JSON: " + std::to_string(r.status), out);
  if (r.status >= 400 && !is_error_body(j))
    violated("an error answer without message or detail: " + std::to_string(r.status), out);
  return j;
}

}  // namespace erg::http_fuzz
