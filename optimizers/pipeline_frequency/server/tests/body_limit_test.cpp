// The body limit over a raw loopback socket (issue 31): cpp-httplib 0.11.4 checks
// set_payload_max_length only against a Content-Length, and reads a chunked body, a body
// without Content-Length (until the client closes) and a compressed body (inflated) whole. The
// test writes the request bytes itself so it controls the framing; every wait is bounded.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "erg/optimizers/pipeline_frequency/server/http_server.hpp"

namespace erg::pipeline_frequency::server {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

const std::size_t kLimit = HttpOptions{}.max_body_bytes;  // 1 MiB
constexpr std::size_t kBody = 2 << 20;                    // 2 MiB
constexpr std::size_t kChunk = 64 << 10;

/// A service and server on a free loopback port, serving on a thread.
class Running {
 public:
  Running() : service_(options()) {
    auto s = HttpServer::bind(service_, HttpOptions{});
    EXPECT_TRUE(s) << s.error().message;
    server_ = std::move(*s);
    thread_ = std::thread([this] { server_->run(); });
    server_->wait_until_ready();
  }
  ~Running() {
    server_->stop();
    thread_.join();
  }
  [[nodiscard]] int port() const { return server_->port(); }

 private:
  static ServiceOptions options() {
    ServiceOptions o;
    o.scheduler = {SchedulerKind::kPointSolution3D, {{{Instruction::kForward, 1410}, {Instruction::kBackward, 1200}}}};
    return o;
  }
  Service service_;
  std::unique_ptr<HttpServer> server_;
  std::thread thread_;
};

struct RawResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  ///< Names in lower case.
  std::string body;
};

/// A raw loopback TCP connection: the test writes the request's bytes itself.
class RawConnection {
 public:
  explicit RawConnection(int port) : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0) << std::strerror(errno);
    const timeval five{5, 0};  // a send the server never drains fails after 5 s
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &five, sizeof five);
  }
  ~RawConnection() { ::close(fd_); }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  /// Sends all of `data`; false once the server closed or reset the connection (or 5 s passed).
  bool send(std::string_view data) {
    while (!data.empty()) {
      const auto n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      data.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
  }
  void finish_sending() { ::shutdown(fd_, SHUT_WR); }

  /// The next response (status line, headers, a Content-Length body) if it came whole within
  /// `timeout`.
  std::optional<RawResponse> response(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::size_t end = 0;
    while ((end = in_.find("\r\n\r\n")) == std::string::npos)
      if (!fill(deadline)) return std::nullopt;
    RawResponse r;
    const std::string head = in_.substr(0, end + 2);
    if (head.rfind("HTTP/1.1 ", 0) != 0 || head.size() < 12) return std::nullopt;
    r.status = std::stoi(head.substr(9, 3));
    for (std::size_t at = head.find("\r\n") + 2; at < head.size();) {
      const auto eol = head.find("\r\n", at);
      const auto line = head.substr(at, eol - at);
      const auto colon = line.find(':');
      if (colon != std::string::npos) {
        std::string name = line.substr(0, colon);
        for (auto& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        const auto value = line.find_first_not_of(' ', colon + 1);
        r.headers[name] = value == std::string::npos ? "" : line.substr(value);
      }
      at = eol + 2;
    }
    const std::size_t length = r.headers.contains("content-length") ? std::stoul(r.headers["content-length"]) : 0;
    while (in_.size() < end + 4 + length)
      if (!fill(deadline)) return std::nullopt;
    r.body = in_.substr(end + 4, length);
    in_.erase(0, end + 4 + length);
    return r;
  }

  /// Whether the server ends the connection (EOF or reset) within `timeout`; what else it
  /// sends is dropped.
  bool ends_within(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (fill(deadline)) in_.clear();
    return ended_;
  }

 private:
  /// Appends what arrives before `deadline`; false on timeout, or once the connection ended.
  bool fill(std::chrono::steady_clock::time_point deadline) {
    if (ended_) return false;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
    char buf[16384];
    const auto n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) {
      ended_ = true;
      return false;
    }
    in_.append(buf, static_cast<std::size_t>(n));
    return true;
  }

  int fd_;
  std::string in_;
  bool ended_ = false;
};

std::string head(const std::string& request_line, const std::string& headers) {
  return request_line + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" + headers + "\r\n";
}

/// A valid JobInfo for a one-rank job, `size` bytes long (whitespace before its closing brace).
std::string padded_job(std::size_t size) {
  std::string text = R"({"job_id": "", "dp_degree": 1, "pp_degree": 1, "tp_degree": 1, "world_size": 1})";
  text.insert(text.size() - 1, size - text.size(), ' ');
  return text;
}

/// `body` as `chunk`-byte chunks, then the last chunk.
std::vector<std::string> chunked(const std::string& body, std::size_t chunk) {
  std::vector<std::string> out;
  char size[32];
  for (std::size_t at = 0; at < body.size(); at += chunk) {
    const auto n = std::min(chunk, body.size() - at);
    std::snprintf(size, sizeof size, "%zx\r\n", n);
    out.push_back(size + body.substr(at, n) + "\r\n");
  }
  out.emplace_back("0\r\n\r\n");
  return out;
}

std::string gzip(const std::string& data) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, Z_BEST_COMPRESSION, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, data.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

std::string message(const RawResponse& r) {
  const auto j = json::parse(r.body, nullptr, false);
  return j.is_object() && j.contains("message") && j["message"].is_string() ? j["message"].get<std::string>() : "";
}

TEST(PerseusBodyLimit, ChunkedBodyIsRefusedBeforeItIsRead) {
  Running server;
  const auto parts = chunked(padded_job(kBody), kChunk);
  RawConnection raw(server.port());
  ASSERT_TRUE(raw.send(head("POST /register_job", "Transfer-Encoding: chunked\r\n") + parts[0]));
  // One chunk of 32 is out: a server reading the body waits for the rest (until its 5 s read
  // timeout, then 400); this one answers now.
  const auto r = raw.response(10s);
  ASSERT_TRUE(r) << "no answer while the body was incomplete";
  EXPECT_EQ(r->status, 411) << r->body;
  EXPECT_NE(message(*r).find("chunked request bodies are not accepted"), std::string::npos) << r->body;
  EXPECT_NE(message(*r).find("Content-Length (at most " + std::to_string(kLimit) + " bytes)"), std::string::npos)
      << r->body;
  EXPECT_EQ(r->headers.contains("connection") ? r->headers.at("connection") : "", "close");
  // The server closes the connection rather than read on: the rest of the body is never parsed.
  for (std::size_t i = 1; i < parts.size() && raw.send(parts[i]); ++i) {
  }
  EXPECT_TRUE(raw.ends_within(5s));
}

TEST(PerseusBodyLimit, AWholeChunkedBodyOverTheLimitIsNotTaken) {
  Running server;
  const auto parts = chunked(padded_job(kBody), kChunk);
  RawConnection raw(server.port());
  // All of it, from another thread (each send bounded by 5 s), while this one waits for the answer.
  std::thread writer([&] {
    if (!raw.send(head("POST /register_job", "Transfer-Encoding: chunked\r\n"))) return;
    for (const auto& p : parts)
      if (!raw.send(p)) return;
  });
  const auto r = raw.response(20s);
  writer.join();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 411) << "a 2 MiB chunked body was taken: " << r->body;
}

TEST(PerseusBodyLimit, ABodyWithoutContentLengthIsRefused) {
  Running server;
  RawConnection raw(server.port());
  // No Content-Length, no Transfer-Encoding: httplib would read until the client stops sending.
  ASSERT_TRUE(raw.send(head("POST /register_job", "") + padded_job(kBody)));
  raw.finish_sending();
  const auto r = raw.response(20s);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 411) << r->body;
  EXPECT_NE(message(*r).find("Content-Length"), std::string::npos) << r->body;
  EXPECT_TRUE(raw.ends_within(5s));
}

TEST(PerseusBodyLimit, ACompressedBodyIsRefused) {
  Running server;
  // 2 MiB of JSON in a few KiB of gzip: under the limit as sent, twice over it inflated.
  const auto body = gzip(padded_job(kBody));
  ASSERT_LT(body.size(), kLimit);
  RawConnection raw(server.port());
  ASSERT_TRUE(raw.send(
      head("POST /register_job", "Content-Encoding: gzip\r\nContent-Length: " + std::to_string(body.size()) + "\r\n") +
      body));
  const auto r = raw.response(20s);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 415) << r->body;
  EXPECT_NE(message(*r).find("compressed request bodies are not accepted"), std::string::npos) << r->body;
}

TEST(PerseusBodyLimit, ContentLengthBodiesStillWork) {
  Running server;
  RawConnection raw(server.port());
  // Two requests on one kept-alive connection, each with Content-Length.
  for (int i = 0; i < 2; ++i) {
    const auto body = padded_job(200 + static_cast<std::size_t>(i));
    ASSERT_TRUE(raw.send(head("POST /register_job", "Content-Length: " + std::to_string(body.size()) + "\r\n") + body));
    const auto r = raw.response(20s);
    ASSERT_TRUE(r);
    // The second is the same configuration within the same second, or a new one a second later.
    EXPECT_TRUE(r->status == 200 || (i == 1 && r->status == 409)) << r->status << " " << r->body;
  }
  // A body at the limit is read; one byte over answers 413 as before.
  httplib::Client c("127.0.0.1", server.port());
  c.set_connection_timeout(5);
  c.set_read_timeout(30);
  auto res = c.Post("/register_job", padded_job(kLimit), "application/json");
  ASSERT_TRUE(res);
  EXPECT_TRUE(res->status == 200 || res->status == 409) << res->status << " " << res->body;
  res = c.Post("/register_job", padded_job(kLimit + 1), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 413) << res->body;
}

}  // namespace
}  // namespace erg::pipeline_frequency::server
