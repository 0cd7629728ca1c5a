#include "streaming.hpp"

#include <algorithm>

#include "erg/protocol/bodies.hpp"
#include "replies.hpp"

namespace erg::daemon {

using nlohmann::json;

namespace {

std::chrono::nanoseconds period_of(double hz) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(1.0 / hz));
}

}  // namespace

/// A GPU's poller sends an event when the instantaneous power (mW) changed.
struct PowerStreams::GpuStream {
  unsigned id = 0;
  Gpu* gpu = nullptr;
  std::optional<std::uint32_t> last_mw;  // poller thread only
  std::unique_ptr<PowerPoller> poller;   // last: stops before the state above goes

  std::optional<std::string> sample() {
    auto p = gpu->power(PowerDomain::kDeviceInstant);
    if (!p) return std::nullopt;
    std::uint32_t mw = to_u32(p->value());
    if (last_mw == mw) return std::nullopt;
    last_mw = mw;
    return protocol::sse_event(json{{"timestamp_ms", unix_ms()}, {"gpu_id", id}, {"power_mw", mw}});
  }
};

/// A CPU's poller differentiates the package and DRAM counters between two polls and sends an
/// event when either power (mW) changed.
struct PowerStreams::CpuStream {
  unsigned id = 0;
  Cpu* cpu = nullptr;
  // poller thread only
  std::optional<double> last_pkg_uj, last_dram_uj;
  std::chrono::steady_clock::time_point last_time;
  std::optional<std::uint64_t> last_cpu_mw, last_dram_mw;
  bool have_last_event = false;
  std::unique_ptr<PowerPoller> poller;  // last

  void reset() {
    last_pkg_uj.reset();
    last_dram_uj.reset();
    have_last_event = false;
  }

  std::optional<std::string> sample() {
    auto now = std::chrono::steady_clock::now();
    auto e = cpu->package_energy();
    if (!e) return std::nullopt;
    std::optional<double> d;
    if (cpu->capabilities().dram)
      if (auto r = cpu->dram_energy()) d = r->value();
    std::optional<std::string> out;
    if (last_pkg_uj) {
      // Measured elapsed time, not the nominal period (zeusd's quirk, fixed upstream in #283).
      double secs = std::chrono::duration<double>(now - last_time).count();
      if (secs > 0) {
        std::uint64_t cpu_mw = to_u64((e->value() - *last_pkg_uj) / 1000.0 / secs);
        std::optional<std::uint64_t> dram_mw;
        if (d && last_dram_uj) dram_mw = to_u64((*d - *last_dram_uj) / 1000.0 / secs);
        if (!have_last_event || cpu_mw != last_cpu_mw || dram_mw != last_dram_mw) {
          json j = {{"timestamp_ms", unix_ms()}, {"cpu_id", id}, {"cpu_mw", cpu_mw}, {"dram_mw", nullptr}};
          if (dram_mw) j["dram_mw"] = *dram_mw;
          out = protocol::sse_event(j);
          last_cpu_mw = cpu_mw;
          last_dram_mw = dram_mw;
          have_last_event = true;
        }
      }
    }
    last_pkg_uj = e->value();
    last_dram_uj = d;
    last_time = now;
    return out;
  }
};

PowerStreams::PowerStreams(const DeviceSlots& devices, double gpu_hz, double cpu_hz,
                           std::chrono::milliseconds peer_check)
    : devices_(devices), peer_check_(std::max(peer_check, std::chrono::milliseconds(1))) {
  for (unsigned i = 0; i < devices.gpus.size(); ++i) {
    auto s = std::make_unique<GpuStream>();
    s->id = i;
    s->gpu = devices.gpus[i].gpu.get();
    GpuStream* raw = s.get();
    s->poller = std::make_unique<PowerPoller>(
        gpu_hub_, period_of(gpu_hz), [raw] { return raw->sample(); }, [raw] { raw->last_mw.reset(); });
    gpus_.push_back(std::move(s));
  }
  for (unsigned i = 0; i < devices.cpus.size(); ++i) {
    auto s = std::make_unique<CpuStream>();
    s->id = i;
    s->cpu = devices.cpus[i].cpu.get();
    CpuStream* raw = s.get();
    s->poller = std::make_unique<PowerPoller>(
        cpu_hub_, period_of(cpu_hz), [raw] { return raw->sample(); }, [raw] { raw->reset(); });
    cpus_.push_back(std::move(s));
  }
}

PowerStreams::~PowerStreams() { stop(); }

void PowerStreams::stop() {
  stopping_.store(true);
  for (Hub* hub : {gpu_hub_.get(), cpu_hub_.get()}) {
    { std::lock_guard lock(hub->mutex); }  // a stream between its check and its wait sees the flag
    hub->cv.notify_all();
  }
}

Reply PowerStreams::gpu_stream_power(const protocol::Query& query) const {
  std::vector<unsigned> ids;
  if (auto bad = select_ids_listing_unknown(query, "gpu_ids", devices_.gpus.size(), "GPU", ids)) return std::move(*bad);
  return Reply{{200, "", "", {}}, StreamSpec{true, std::move(ids)}};
}

Reply PowerStreams::cpu_stream_power(const protocol::Query& query) const {
  std::vector<unsigned> ids;
  if (auto bad = select_ids(query, "cpu_ids", devices_.cpus.size(), "CPU", ids)) return std::move(*bad);
  return Reply{{200, "", "", {}}, StreamSpec{false, std::move(ids)}};
}

unsigned PowerStreams::subscribers(bool gpu, unsigned id) const {
  if (gpu) return id < gpus_.size() ? gpus_[id]->poller->subscribers() : 0;
  return id < cpus_.size() ? cpus_[id]->poller->subscribers() : 0;
}

void PowerStreams::run(const StreamSpec& spec, const std::function<bool(std::string_view)>& write,
                       const std::function<bool()>& closed) {
  std::vector<PowerPoller*> pollers;
  for (unsigned id : spec.ids) {
    if (spec.gpu && id < gpus_.size()) pollers.push_back(gpus_[id]->poller.get());
    if (!spec.gpu && id < cpus_.size()) pollers.push_back(cpus_[id]->poller.get());
  }
  Hub& hub = spec.gpu ? *gpu_hub_ : *cpu_hub_;
  std::vector<std::uint64_t> seen(pollers.size(), 0);
  {
    std::lock_guard lock(hub.mutex);
    for (std::size_t k = 0; k < pollers.size(); ++k) seen[k] = pollers[k]->seq_locked();
  }
  for (auto* p : pollers) p->subscribe();
  struct Unsubscribe {
    std::vector<PowerPoller*>& pollers;
    ~Unsubscribe() {
      for (auto* p : pollers) p->unsubscribe();
    }
  } unsubscribe{pollers};

  std::vector<std::string> events;
  while (!stopping_.load() && !closed()) {
    events.clear();
    {
      std::unique_lock lock(hub.mutex);
      auto fresh = [&] {
        for (std::size_t k = 0; k < pollers.size(); ++k)
          if (pollers[k]->seq_locked() != seen[k]) return true;
        return stopping_.load();
      };
      // Wakes at least every peer_check_ (100 ms) to notice a peer that left without a new sample.
      hub.cv.wait_for(lock, peer_check_, fresh);
      for (std::size_t k = 0; k < pollers.size(); ++k) {
        if (pollers[k]->seq_locked() != seen[k]) {
          seen[k] = pollers[k]->seq_locked();
          events.push_back(pollers[k]->event_locked());
        }
      }
    }
    for (const auto& e : events)
      if (!write(e)) return;
  }
}

}  // namespace erg::daemon
