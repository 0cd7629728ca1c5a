#include "erg/devices/devices.hpp"

#include <stdlib.h>

#include <array>
#include <cstdlib>
#include <set>
#include <utility>

#include "erg/backends/discovery.hpp"
#ifdef ERG_DEVICES_WITH_SIM
#include "erg/sim/machine.hpp"
#include "erg/sim/spec.hpp"
#endif
#ifdef ERG_DEVICES_WITH_DAEMON
#include "erg/client/remote.hpp"
#endif

namespace erg::devices {

namespace {

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

/// The spec to simulate, by the documented precedence; nullopt: no spec asked for.
Result<std::optional<std::string>> requested_spec(const DeviceOptions& o) {
  if (o.simulate) {
    if (o.simulate->empty())
      return fail(ErrorCode::kInvalidArgument, "--simulate needs a spec, e.g. 4xA100 (it was empty)");
    return std::optional<std::string>(*o.simulate);
  }
  return env("ERG_SIMULATE");
}

#ifdef ERG_DEVICES_WITH_SIM
struct Opened {
  std::shared_ptr<sim::Machine> machine;
  Source source = Source::kHardware;
};

Result<std::shared_ptr<sim::Machine>> attach(const std::string& state) {
  auto m = sim::Machine::attach(state);
  if (!m)
    return fail(m.error().code, "ERG_SIM_STATE=" + state + " cannot be attached (" + m.error().message +
                                    "); unset ERG_SIM_STATE to create a new simulated machine");
  return std::shared_ptr<sim::Machine>(std::move(*m));
}

Result<Opened> simulation(const DeviceOptions& o) {
  auto spec = requested_spec(o);
  if (!spec) return fail(spec.error());
  const auto state = env("ERG_SIM_STATE");
  Opened out;
  if (!*spec) {
    if (!state) return out;  // the hardware
    auto m = attach(*state);
    if (!m) return fail(m.error());
    out.machine = std::move(*m);
  } else {
    if (state) {
      // A machine that is gone (its creator exited, in this process or its parent) has nothing
      // to share: the spec alone decides, and a new machine is made from it.
      auto m = sim::Machine::attach(*state);
      if (m && (*m)->spec().text == **spec) out.machine = std::move(*m);
    }
    if (!out.machine) {
      auto parsed = sim::parse_spec(**spec);
      if (!parsed)
        return fail(ErrorCode::kInvalidArgument, std::string("invalid ") +
                                                     (o.simulate ? "--simulate" : "ERG_SIMULATE") + " spec '" + **spec +
                                                     "': " + parsed.error().message);
      auto created = sim::Machine::create_temp(*parsed);
      if (!created) return fail(created.error());
      out.machine = std::move(*created);
      out.source = Source::kSimulatedNew;
    }
  }
  if (out.source == Source::kHardware) out.source = Source::kSimulatedAttached;
  // Every seam (and every child) points at this machine, whichever way it was found.
  if (auto r = out.machine->export_env(); !r) return fail(r.error());
  return out;
}
#endif

Result<std::vector<unsigned>> check_indices(const std::optional<std::vector<unsigned>>& wanted, std::size_t count,
                                            const char* kind) {
  std::vector<unsigned> out;
  if (!wanted) {
    for (unsigned i = 0; i < count; ++i) out.push_back(i);
    return out;
  }
  std::set<unsigned> seen;
  for (unsigned i : *wanted) {
    if (i >= count) {
      std::string there =
          count == 0 ? std::string("none found") : (count == 1 ? std::string("0") : "0-" + std::to_string(count - 1));
      return fail(ErrorCode::kNotFound,
                  std::string("no ") + kind + " with index " + std::to_string(i) + " (" + kind + "s: " + there + ")");
    }
    if (!seen.insert(i).second)
      return fail(ErrorCode::kInvalidArgument, std::string(kind) + " index " + std::to_string(i) + " is repeated");
    out.push_back(i);
  }
  return out;
}

/// Restores the simulator's variables unless released: a failed open_devices must not leave them
/// naming a machine that went away with the failure.
class EnvRestore {
 public:
  EnvRestore() {
    for (std::size_t i = 0; i < kNames.size(); ++i) saved_[i] = env(kNames[i]);
  }
  ~EnvRestore() {
    if (released_) return;
    for (std::size_t i = 0; i < kNames.size(); ++i) {
      if (saved_[i])
        ::setenv(kNames[i], saved_[i]->c_str(), 1);
      else
        ::unsetenv(kNames[i]);
    }
  }
  EnvRestore(const EnvRestore&) = delete;
  EnvRestore& operator=(const EnvRestore&) = delete;
  void release() { released_ = true; }

 private:
  static constexpr std::array<const char*, 6> kNames = {"ERG_SIM_STATE",     "ERG_SIMULATE",       "ERG_NVML_LIBRARY",
                                                        "ERG_POWERCAP_ROOT", "ERG_AMDSMI_LIBRARY", "ERG_HWMON_ROOT"};
  std::array<std::optional<std::string>, 6> saved_;
  bool released_ = false;
};

}  // namespace

std::string_view to_string(Source source) {
  switch (source) {
    case Source::kHardware: return "hardware";
    case Source::kSimulatedNew: return "simulated (new machine)";
    case Source::kSimulatedAttached: return "simulated (attached)";
  }
  return "unknown";
}

Result<std::shared_ptr<sim::Machine>> open_machine(const DeviceOptions& options) {
#ifdef ERG_DEVICES_WITH_SIM
  auto opened = simulation(options);
  if (!opened) return fail(opened.error());
  return std::move(opened->machine);
#else
  auto spec = requested_spec(options);
  if (!spec) return fail(spec.error());
  if (*spec || env("ERG_SIM_STATE"))
    return fail(ErrorCode::kNotSupported, "this build of erg has no simulated machine (ERG_BUILD_SIM=OFF)");
  return std::shared_ptr<sim::Machine>();
#endif
}

Result<Devices> open_devices(const DeviceOptions& options) {
  Devices out;
  EnvRestore restore;
#ifdef ERG_DEVICES_WITH_SIM
  auto opened = simulation(options);
  if (!opened) return fail(opened.error());
  out.machine = std::move(opened->machine);
  out.source = opened->source;
  if (out.machine) {
    out.spec = out.machine->spec().text;
    out.state_file = out.machine->state_file().string();
  }
#else
  if (auto m = open_machine(options); !m) return fail(m.error());
#endif

  backends::DiscoveryOptions discovery;
  if (options.cuda_visible_devices) discovery.nvml.cuda_visible_devices = *options.cuda_visible_devices;
  auto local = backends::discover(discovery);
  if (!local) return fail(local.error());
  out.inventory = std::move(*local);

#ifdef ERG_DEVICES_WITH_DAEMON
  if (options.daemon == DaemonUse::kFromEnvironment) {
    auto endpoint = client::DaemonClient::endpoint_from_env();
    if (!endpoint) return fail(endpoint.error());
    if (*endpoint) out.inventory = client::with_daemon(std::move(out.inventory), **endpoint);
  }
#endif
  out.inventory.simulated = out.machine != nullptr;

  auto gpus = check_indices(options.gpu_indices, out.inventory.gpus.size(), "GPU");
  if (!gpus) return fail(gpus.error());
  auto cpus = check_indices(options.cpu_indices, out.inventory.cpus.size(), "CPU");
  if (!cpus) return fail(cpus.error());
  out.gpu_indices = std::move(*gpus);
  out.cpu_indices = std::move(*cpus);
  restore.release();
  return out;
}

}  // namespace erg::devices
