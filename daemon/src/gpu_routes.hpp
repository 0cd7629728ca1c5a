#pragma once
// The GPU routes: the gpu-read group (gpu_read_routes.cpp) and the gpu-control group
// (gpu_control_routes.cpp). One function per route; the query is already checked against the
// route's field set.

#include "device_slots.hpp"
#include "erg/daemon/request_handler.hpp"
#include "erg/protocol/query.hpp"
#include "limit_restorer.hpp"

namespace erg::daemon {

// gpu-read: each read calls the device from the connection's thread (NVML is thread-safe).
Reply gpu_get_cumulative_energy(const DeviceSlots& devices, const protocol::Query& query);
Reply gpu_get_power(const DeviceSlots& devices, const protocol::Query& query);
Reply gpu_get_power_limit(const DeviceSlots& devices, const protocol::Query& query);
Reply gpu_get_power_limit_constraints(const DeviceSlots& devices, const protocol::Query& query);
Reply gpu_get_persistence_mode(const DeviceSlots& devices, const protocol::Query& query);

// gpu-control: each setter runs on the GPU's owner thread; block=true waits for every GPU,
// block=false answers once the commands are queued (only queueing errors are reported).
/// `restorer` (nullptr: --no-restore-on-exit) records `peer`'s process as the owner of each limit set.
Reply gpu_set_power_limit(const DeviceSlots& devices, const protocol::Query& query, const Peer& peer,
                          LimitRestorer* restorer);
Reply gpu_set_persistence_mode(const DeviceSlots& devices, const protocol::Query& query);
/// The locked-clock routes: with a `restorer`, the setting process owns the domain's clocks
/// until it exits (then they are reset) or another set or reset reaches them.
Reply gpu_set_gpu_locked_clocks(const DeviceSlots& devices, const protocol::Query& query, const Peer& peer,
                                LimitRestorer* restorer);
Reply gpu_set_mem_locked_clocks(const DeviceSlots& devices, const protocol::Query& query, const Peer& peer,
                                LimitRestorer* restorer);
Reply gpu_reset_gpu_locked_clocks(const DeviceSlots& devices, const protocol::Query& query, LimitRestorer* restorer);
Reply gpu_reset_mem_locked_clocks(const DeviceSlots& devices, const protocol::Query& query, LimitRestorer* restorer);
Reply gpu_reset_locked_clocks(const DeviceSlots& devices, const protocol::Query& query, LimitRestorer* restorer);

}  // namespace erg::daemon
