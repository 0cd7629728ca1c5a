#pragma once
/// ergd as a library: the zeusd v0.5 HTTP API (plus /metrics) over a Unix socket and
/// optionally loopback TCP, serving the devices of an Inventory.
///
/// Threads: one owner thread per GPU runs its setters in order (fed by a queue); reads call
/// the device from the connection's thread (NVML and RaplCpu are thread-safe); one power
/// poller per device runs only while an SSE subscriber listens; one thread per connection; one
/// attribution sampler reads every GPU's counter and per-process samples for /attribution
/// (Config::attribution_poll; 0 turns it off).
///
/// Inside (daemon/src): a server (server.cpp, listeners.cpp, connection.cpp) that knows
/// nothing of devices and calls a RequestHandler; the router (router.cpp), which is that
/// handler; one file per API group (discovery_routes, gpu_read_routes, gpu_control_routes,
/// cpu_routes, streaming, metrics_routes, attribution); the Prometheus exposition on its own.

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "erg/core/discovery.hpp"
#include "erg/core/result.hpp"
#include "erg/daemon/config.hpp"
#include "erg/daemon/request_handler.hpp"
#include "erg/protocol/http.hpp"

namespace erg::daemon {

class Daemon {
 public:
  /// Checks the configuration against the inventory and the process's privilege: an enabled
  /// gpu-control group needs euid 0 or CAP_SYS_ADMIN, cpu-read needs readable RAPL counters
  /// (kNoPermission, saying which group and how to fix it). Starts the device owner threads.
  /// Does not listen yet.
  static Result<std::unique_ptr<Daemon>> create(Config config, Inventory inventory);
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  /// Binds the Unix socket (a stale socket, one nobody accepts on, is replaced; a live one is
  /// kAlreadyExists) and the TCP address, then serves on background threads.
  Result<void> start();
  /// Stops accepting, closes every connection, joins every thread, removes the socket.
  /// Idempotent; also run by the destructor.
  void stop();

  [[nodiscard]] const Config& config() const;
  /// The bound TCP port (after start(); 0 without TCP).
  [[nodiscard]] std::uint16_t tcp_port() const;
  /// What start() accepted but the operator should be told, one line each (a socket directory
  /// other users may write to, allowed by Config::allow_insecure_socket_dir). Empty before start().
  [[nodiscard]] std::vector<std::string> warnings() const;

  /// Routes one parsed request. Thread-safe; never throws (a handler's exception becomes 500).
  Reply dispatch(const protocol::HttpRequest& request, const Peer& peer);
  /// Runs an SSE stream: calls `write` with each event until it returns false, `closed()`
  /// returns true, or the daemon stops. Holds the device pollers awake meanwhile.
  void run_stream(const StreamSpec& spec, const std::function<bool(std::string_view)>& write,
                  const std::function<bool()>& closed);

  /// Active SSE subscribers per device kind (tests).
  [[nodiscard]] unsigned subscribers(bool gpu, unsigned id) const;

  struct Impl;

 private:
  explicit Daemon(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// Runs ergd from a command line until SIGTERM/SIGINT; returns the exit status.
int run_main(int argc, char** argv);

}  // namespace erg::daemon
