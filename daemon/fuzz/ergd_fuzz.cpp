// libFuzzer target: request parsing and route dispatch of ergd over fake devices. Feeds the
// input as a byte stream (possibly several pipelined requests) through the same parser the
// server uses, dispatches every complete request, and serializes the replies.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "erg/daemon/daemon.hpp"
#include "erg/protocol/http.hpp"
#include "erg/protocol/query.hpp"
#include "erg/sim/fake_devices.hpp"

namespace {

erg::daemon::Daemon& daemon_instance() {
  static std::unique_ptr<erg::daemon::Daemon> d = [] {
    erg::Inventory inv;
    for (unsigned i = 0; i < 4; ++i) inv.gpus.push_back(std::make_shared<erg::sim::FakeGpu>(i, i != 3));
    for (unsigned i = 0; i < 2; ++i) inv.cpus.push_back(std::make_shared<erg::sim::FakeCpu>(i, i == 0));
    erg::daemon::Config c;
    c.socket_path.clear();
    c.skip_privilege_check = true;
    c.cpu_power_poll_hz = 1000;  // /cpu/get_power sleeps one period
    c.allow_uid[erg::protocol::ApiGroup::kGpuControl] = {1000};
    return std::move(*erg::daemon::Daemon::create(c, std::move(inv)));
  }();
  return *d;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  erg::protocol::HttpRequest request;
  // The query helpers on their own.
  (void)erg::protocol::parse_ids(input);
  (void)erg::protocol::parse_query(input);
  (void)erg::protocol::is_valid_utf8(input);
  for (int i = 0; i < 8 && !input.empty(); ++i) {
    auto o = erg::protocol::parse_request(input, request);
    if (o.status != erg::protocol::ParseStatus::kComplete) break;
    if (o.consumed == 0 || o.consumed > input.size()) __builtin_trap();
    input.remove_prefix(o.consumed);
    erg::daemon::Peer peer{(size & 1) != 0, (size & 2) ? 1234u : 0u, 1234u};
    auto reply = daemon_instance().dispatch(request, peer);
    auto wire = erg::protocol::serialize_response(reply.response, request.keep_alive);
    erg::protocol::ParsedResponse parsed;
    if (erg::protocol::parse_response(wire, parsed).status != erg::protocol::ParseStatus::kComplete) __builtin_trap();
  }
  return 0;
}
