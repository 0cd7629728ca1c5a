#pragma once
// Debian's prometheus (and prometheus-pushgateway) started on loopback for integration tests,
// queried through the HTTP API. A missing binary is a test failure naming the package, never a
// skip: CI installs them through ./dev deps.

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>

#include "erg/client/connection.hpp"
#include "process.hpp"

namespace erg::testing {

/// A loopback TCP port free now.
inline int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  const int port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

/// Percent-encodes a PromQL expression for a query string.
inline std::string url_encode(const std::string& s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '_' || c == '-' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

/// GET http://127.0.0.1:port/path; nullopt when nothing answered.
inline std::optional<protocol::ParsedResponse> http_get(int port, const std::string& path) {
  client::Connection c(client::Endpoint{"", "127.0.0.1", static_cast<std::uint16_t>(port), ""});
  auto r = c.request("GET", path);
  if (!r) return std::nullopt;
  return *r;
}

/// Prometheus on 127.0.0.1 with `scrape_configs` (YAML, indented as a list under scrape_configs),
/// scraping every second.
class Prometheus {
 public:
  Prometheus(const std::string& dir, const std::string& scrape_configs) : port_(free_port()) {
    const std::string bin = "/usr/bin/prometheus";
    if (!std::filesystem::exists(bin)) {
      ADD_FAILURE() << bin << " is missing: install Debian's prometheus (./dev deps)";
      return;
    }
    const std::string cfg = dir + "/prometheus.yml";
    std::ofstream(cfg) << "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n  evaluation_interval: 1s\n"
                       << "scrape_configs:\n"
                       << scrape_configs;
    process_ = std::make_unique<BackgroundShell>(
        "exec " + bin + " --config.file=" + cfg + " --storage.tsdb.path=" + dir + "/tsdb" +
        " --web.listen-address=127.0.0.1:" + std::to_string(port_) + " --log.level=warn");
  }
  [[nodiscard]] int port() const { return port_; }
  [[nodiscard]] std::string log() const { return process_ ? process_->err() : ""; }

  /// Waits (up to `timeout`) until every target of `jobs` reports health "up". Prometheus
  /// scrapes a new target only 5–8 s after it starts.
  bool wait_up(const std::vector<std::string>& jobs, std::chrono::seconds timeout = std::chrono::seconds(40)) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
      if (auto r = http_get(port_, "/api/v1/targets"); r && r->status == 200) {
        auto j = nlohmann::json::parse(r->body, nullptr, false);
        std::size_t up = 0;
        if (!j.is_discarded())
          for (auto& t : j["data"]["activeTargets"])
            for (const auto& job : jobs)
              if (t["labels"]["job"] == job && t["health"] == "up") ++up;
        if (up >= jobs.size()) return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return false;
  }

  /// The instant query's result vector (empty when the query failed or matched nothing).
  nlohmann::json query(const std::string& expr) {
    auto r = http_get(port_, "/api/v1/query?query=" + url_encode(expr));
    if (!r || r->status != 200) return nlohmann::json::array();
    auto j = nlohmann::json::parse(r->body, nullptr, false);
    if (j.is_discarded() || j["status"] != "success") return nlohmann::json::array();
    return j["data"]["result"];
  }
  /// The first sample's value of `expr`, if any.
  std::optional<double> value(const std::string& expr) {
    auto res = query(expr);
    if (!res.is_array() || res.empty()) return std::nullopt;
    return std::stod(res[0]["value"][1].get<std::string>());
  }

 private:
  int port_;
  std::unique_ptr<BackgroundShell> process_;
};

}  // namespace erg::testing
