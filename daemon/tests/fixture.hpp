#pragma once
// A Daemon over in-process fake devices (4 GPUs with a 100-300 W limit range like zeusd's
// mock, 2 CPU packages), plus helpers to call it through dispatch().

#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "erg/daemon/daemon.hpp"
#include "erg/sim/fake_devices.hpp"

namespace erg::daemon::testing {

struct FakeDaemon {
  std::vector<std::shared_ptr<sim::FakeGpu>> gpus;
  std::vector<std::shared_ptr<sim::FakeCpu>> cpus;
  std::unique_ptr<Daemon> daemon;

  explicit FakeDaemon(Config config = {}, unsigned n_gpus = 4) {
    Inventory inv;
    for (unsigned i = 0; i < n_gpus; ++i) {
      gpus.push_back(std::make_shared<sim::FakeGpu>(i, i != 3, "Fake A100"));
      inv.gpus.push_back(gpus.back());
    }
    for (unsigned i = 0; i < 2; ++i) {
      cpus.push_back(std::make_shared<sim::FakeCpu>(i, i == 0));
      cpus.back()->set_energy_uj(1000.0 * (i + 1), 500.0);
      inv.cpus.push_back(cpus.back());
    }
    config.skip_privilege_check = true;
    config.socket_path.clear();
    auto d = Daemon::create(std::move(config), std::move(inv));
    if (!d) throw std::runtime_error(d.error().message);
    daemon = std::move(*d);
  }

  Reply call(const std::string& method, const std::string& target, Peer peer = {},
             std::vector<std::pair<std::string, std::string>> headers = {}) {
    protocol::HttpRequest r;
    std::string buf = method + " " + target + " HTTP/1.1\r\n";
    for (auto& [k, v] : headers) buf += k + ": " + v + "\r\n";
    buf += "\r\n";
    auto o = protocol::parse_request(buf, r);
    EXPECT_EQ(o.status, protocol::ParseStatus::kComplete) << target;
    return daemon->dispatch(r, peer);
  }
};

inline nlohmann::json body_json(const Reply& r) { return nlohmann::json::parse(r.response.body); }

}  // namespace erg::daemon::testing
