#include "pusher.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "erg/exporters/prometheus/collector.hpp"

namespace erg::prom {

namespace {

using Clock = std::chrono::steady_clock;

/// URL-safe base64 with padding; "=" for the empty string (the Pushgateway's spelling of an
/// empty label value), so any window name fits in a path segment.
std::string base64url(const std::string& in) {
  static const char* a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  if (in.empty()) return "=";
  std::string out;
  std::size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const unsigned v = (static_cast<unsigned char>(in[i]) << 16) | (static_cast<unsigned char>(in[i + 1]) << 8) |
                       static_cast<unsigned char>(in[i + 2]);
    out += {a[(v >> 18) & 63], a[(v >> 12) & 63], a[(v >> 6) & 63], a[v & 63]};
  }
  if (i + 1 == in.size()) {
    const unsigned v = static_cast<unsigned char>(in[i]) << 16;
    out += {a[(v >> 18) & 63], a[(v >> 12) & 63], '=', '='};
  } else if (i + 2 == in.size()) {
    const unsigned v = (static_cast<unsigned char>(in[i]) << 16) | (static_cast<unsigned char>(in[i + 1]) << 8);
    out += {a[(v >> 18) & 63], a[(v >> 12) & 63], a[(v >> 6) & 63], '='};
  }
  return out;
}

/// One HTTP/1.1 exchange over TCP, every step bounded by `deadline`. The status code, or an error.
Result<int> exchange(const std::string& host, const std::string& port, const std::string& request,
                     Clock::time_point deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &res); rc != 0)
    return fail(ErrorCode::kUnavailable, "cannot resolve " + host + ": " + ::gai_strerror(rc));
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> guard(res, ::freeaddrinfo);
  int fd = ::socket(res->ai_family, res->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, res->ai_protocol);
  if (fd < 0) return fail(ErrorCode::kIo, std::string("socket: ") + std::strerror(errno));
  std::unique_ptr<int, void (*)(int*)> close_fd(&fd, [](int* f) { ::close(*f); });
  auto wait = [&](short events) -> Result<void> {
    while (true) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return fail(ErrorCode::kTimeout, "no answer in time");
      pollfd p{fd, events, 0};
      const int n = ::poll(&p, 1, static_cast<int>(left));
      if (n > 0) return ok();
      if (n < 0 && errno != EINTR) return fail(ErrorCode::kIo, std::string("poll: ") + std::strerror(errno));
    }
  };
  if (::connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
    if (errno != EINPROGRESS) return fail(ErrorCode::kUnavailable, std::string("connect: ") + std::strerror(errno));
    if (auto w = wait(POLLOUT); !w) return fail(w.error());
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return fail(ErrorCode::kUnavailable, std::string("connect: ") + std::strerror(err));
  }
  for (std::size_t sent = 0; sent < request.size();) {
    if (auto w = wait(POLLOUT); !w) return fail(w.error());
    const ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN && errno != EINTR)
      return fail(ErrorCode::kIo, std::string("send: ") + std::strerror(errno));
    if (n > 0) sent += static_cast<std::size_t>(n);
  }
  std::string reply;
  char buf[4096];
  while (reply.find("\r\n") == std::string::npos) {
    if (auto w = wait(POLLIN); !w) return fail(w.error());
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n == 0) break;
    if (n < 0 && errno != EAGAIN && errno != EINTR)
      return fail(ErrorCode::kIo, std::string("recv: ") + std::strerror(errno));
    if (n > 0) reply.append(buf, static_cast<std::size_t>(n));
  }
  int status = 0;
  if (std::sscanf(reply.c_str(), "HTTP/%*d.%*d %d", &status) != 1) return fail(ErrorCode::kIo, "not an HTTP reply");
  return status;
}

struct Item {
  std::string window, kind, body;
};

}  // namespace

struct Pusher::State {
  PushOptions options;
  std::string host, port, group_prefix;
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<Item> queue;
  bool busy = false;
  bool closing = false;
  std::atomic<std::uint64_t> errors{0};

  void report(const std::string& m) {
    if (options.on_error)
      options.on_error(m);
    else
      std::cerr << "erg: " << m << "\n";
  }

  void push(const Item& item) {
    const std::string path = group_prefix + "/window@base64/" + base64url(item.window);
    const std::string request =
        "POST " + path + " HTTP/1.1\r\nHost: " + host + ":" + port +
        "\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: " + std::to_string(item.body.size()) +
        "\r\nConnection: close\r\n\r\n" + item.body;
    for (int attempt = 1; attempt <= options.max_attempts; ++attempt) {
      auto r = exchange(host, port, request, Clock::now() + options.timeout);
      if (r && *r >= 200 && *r < 300) return;
      ++errors;
      report("Pushgateway http://" + host + ":" + port + path + ": " +
             (r ? "HTTP " + std::to_string(*r) : r.error().message) + " (attempt " + std::to_string(attempt) + " of " +
             std::to_string(options.max_attempts) + (attempt == options.max_attempts ? "; dropped)" : ")"));
      if (attempt < options.max_attempts) {
        std::unique_lock lock(mutex);
        // A newer body of the same group ends the retries: it carries the latest state.
        bool newer = false;
        cv.wait_for(lock, options.retry_backoff, [&] {
          for (const auto& q : queue) newer = newer || (q.window == item.window && q.kind == item.kind);
          return newer;
        });
        if (newer) return;
      }
    }
  }

  void run() {
    std::unique_lock lock(mutex);
    while (true) {
      cv.wait(lock, [&] { return closing || !queue.empty(); });
      if (queue.empty()) return;
      Item item = std::move(queue.front());
      queue.pop_front();
      busy = true;
      lock.unlock();
      push(item);
      lock.lock();
      busy = false;
      cv.notify_all();
    }
  }
};

Result<std::unique_ptr<Pusher>> Pusher::create(PushOptions options) {
  std::string url = options.gateway_url;
  if (url.rfind("https://", 0) == 0)
    return fail(ErrorCode::kInvalidArgument, "Pushgateway URL '" + url + "': https is not supported; use http://");
  if (url.rfind("http://", 0) == 0) url = url.substr(7);
  while (!url.empty() && url.back() == '/') url.pop_back();
  const auto colon = url.rfind(':');
  if (url.empty() || url.find('/') != std::string::npos || colon == std::string::npos || colon == 0 ||
      colon + 1 == url.size() || url.find_first_not_of("0123456789", colon + 1) != std::string::npos)
    return fail(ErrorCode::kInvalidArgument,
                "Pushgateway URL '" + options.gateway_url + "' must be http://HOST:PORT or HOST:PORT");
  if (options.job.empty()) return fail(ErrorCode::kInvalidArgument, "Pushgateway job must not be empty");
  if (options.max_attempts < 1) return fail(ErrorCode::kInvalidArgument, "max_attempts must be at least 1");
  auto s = std::make_shared<State>();
  s->host = url.substr(0, colon);
  s->port = url.substr(colon + 1);
  s->group_prefix = "/metrics/job@base64/" + base64url(options.job);
  for (const auto& [k, v] : options.grouping) {
    if (k == "job" || k == "window")
      return fail(ErrorCode::kInvalidArgument, "grouping label '" + k + "' is set by erg itself");
    if (auto checked = check_user_labels({{k, v}}); !checked && k != "name") return fail(checked.error());
    s->group_prefix += "/" + k + "@base64/" + base64url(v);
  }
  s->options = std::move(options);
  return std::unique_ptr<Pusher>(new Pusher(std::move(s)));
}

Pusher::Pusher(std::shared_ptr<State> state) : state_(std::move(state)) {
  thread_ = std::thread([s = state_] { s->run(); });
}

Pusher::~Pusher() {
  const bool done = flush(state_->options.close_timeout);
  if (!done) {
    std::size_t left = 0;
    {
      std::lock_guard lock(state_->mutex);
      left = state_->queue.size() + (state_->busy ? 1 : 0);
    }
    state_->report("Pushgateway: " + std::to_string(left) + " push(es) not done within the close timeout; abandoned");
  }
  {
    std::lock_guard lock(state_->mutex);
    state_->closing = true;
    state_->queue.clear();
  }
  state_->cv.notify_all();
  // A push still in flight ends within its bounded exchange; the thread owns its state.
  if (done)
    thread_.join();
  else
    thread_.detach();
}

void Pusher::submit(const std::string& window, const std::string& kind, std::string body) {
  {
    std::lock_guard lock(state_->mutex);
    bool replaced = false;
    for (auto& q : state_->queue)
      if (q.window == window && q.kind == kind) {
        q.body = std::move(body);
        replaced = true;
        break;
      }
    if (!replaced) state_->queue.push_back(Item{window, kind, std::move(body)});
  }
  state_->cv.notify_all();
}

bool Pusher::flush(std::chrono::milliseconds timeout) {
  std::unique_lock lock(state_->mutex);
  return state_->cv.wait_for(lock, timeout, [&] { return state_->queue.empty() && !state_->busy; });
}

void Pusher::report(const std::string& message) const { state_->report(message); }
std::uint64_t Pusher::errors() const { return state_->errors.load(); }

}  // namespace erg::prom
