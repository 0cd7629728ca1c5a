#pragma once
// A loopback HTTP/1.1 server for provider tests: answers each request with what the test's
// handler returns (status, body, an optional delay before answering), records the requests, and
// bounds everything in time (poll timeouts; stops in its destructor).

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace erg::carbon::testing {

struct Request {
  std::string target;  ///< "/v3/carbon-intensity/latest?zone=DE&..."
  std::string head;    ///< Request line and headers.
  [[nodiscard]] std::string header(const std::string& name) const {
    auto lower = [](std::string s) {
      for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      return s;
    };
    const std::string h = lower(head), key = "\r\n" + lower(name) + ":";
    auto at = h.find(key);
    if (at == std::string::npos) return {};
    auto start = at + key.size();
    auto end = head.find("\r\n", start);
    std::string v = head.substr(start, end - start);
    while (!v.empty() && v.front() == ' ') v.erase(v.begin());
    return v;
  }
};

struct Reply {
  int status = 200;
  std::string body;
  std::chrono::milliseconds delay{0};
};

class LoopbackHttp {
 public:
  explicit LoopbackHttp(std::function<Reply(const Request&)> handler) : handler_(std::move(handler)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    ::listen(fd_, 16);
    socklen_t len = sizeof addr;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~LoopbackHttp() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }
  [[nodiscard]] std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  [[nodiscard]] std::vector<Request> requests() const {
    std::lock_guard lock(mu_);
    return requests_;
  }

 private:
  void serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) continue;
      std::string in;
      char buf[4096];
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (in.find("\r\n\r\n") == std::string::npos && std::chrono::steady_clock::now() < deadline && !stop_) {
        pollfd q{c, POLLIN, 0};
        if (::poll(&q, 1, 20) <= 0) continue;
        const ssize_t n = ::read(c, buf, sizeof buf);
        if (n <= 0) break;
        in.append(buf, static_cast<std::size_t>(n));
      }
      Request req;
      req.head = in.substr(0, in.find("\r\n\r\n"));
      const auto sp1 = req.head.find(' '), sp2 = req.head.find(' ', sp1 + 1);
      if (sp1 != std::string::npos && sp2 != std::string::npos) req.target = req.head.substr(sp1 + 1, sp2 - sp1 - 1);
      {
        std::lock_guard lock(mu_);
        requests_.push_back(req);
      }
      const Reply reply = handler_(req);
      // A slow server: wait (interruptibly) before answering.
      const auto answer_at = std::chrono::steady_clock::now() + reply.delay;
      while (std::chrono::steady_clock::now() < answer_at && !stop_)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      const std::string out = "HTTP/1.1 " + std::to_string(reply.status) +
                              " X\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " +
                              std::to_string(reply.body.size()) + "\r\n\r\n" + reply.body;
      (void)!::send(c, out.data(), out.size(), MSG_NOSIGNAL);
      ::close(c);
    }
  }

  std::function<Reply(const Request&)> handler_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  mutable std::mutex mu_;
  std::vector<Request> requests_;
};

}  // namespace erg::carbon::testing
