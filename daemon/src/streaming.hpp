#pragma once
// The streaming routes (/gpu/stream_power, /cpu/stream_power) and what feeds them: one
// demand-driven power poller per device (polling only while a stream listens), and the loop
// that writes a stream's events.

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "device_slots.hpp"
#include "erg/daemon/request_handler.hpp"
#include "erg/protocol/query.hpp"
#include "power_poller.hpp"

namespace erg::daemon {

class PowerStreams {
 public:
  /// One poller per device; `gpu_hz`/`cpu_hz` in (0, 1000] (checked by the caller). The pollers
  /// sleep until a stream subscribes. A stream with no new sample checks every `peer_check`
  /// whether its peer left. `devices` must outlive this object.
  PowerStreams(const DeviceSlots& devices, double gpu_hz, double cpu_hz,
               std::chrono::milliseconds peer_check = std::chrono::milliseconds(100));
  ~PowerStreams();
  PowerStreams(const PowerStreams&) = delete;
  PowerStreams& operator=(const PowerStreams&) = delete;

  /// The routes: validate the ids and answer a reply that asks the connection for a stream.
  Reply gpu_stream_power(const protocol::Query& query) const;
  Reply cpu_stream_power(const protocol::Query& query) const;

  /// Writes the spec's events (a changed sample of any of its devices) until `write` fails,
  /// `closed()`, or stop(). Subscribes its pollers meanwhile.
  void run(const StreamSpec& spec, const std::function<bool(std::string_view)>& write,
           const std::function<bool()>& closed);
  /// Ends every running stream promptly (within one wait). Idempotent.
  void stop();

  /// Active subscribers of one device's poller (tests).
  [[nodiscard]] unsigned subscribers(bool gpu, unsigned id) const;

 private:
  struct GpuStream;
  struct CpuStream;

  const DeviceSlots& devices_;
  std::shared_ptr<Hub> gpu_hub_ = std::make_shared<Hub>();
  std::shared_ptr<Hub> cpu_hub_ = std::make_shared<Hub>();
  std::chrono::milliseconds peer_check_;
  std::atomic<bool> stopping_{false};
  std::vector<std::unique_ptr<GpuStream>> gpus_;
  std::vector<std::unique_ptr<CpuStream>> cpus_;
};

}  // namespace erg::daemon
