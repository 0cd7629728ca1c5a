#pragma once
// The cpu-read routes (the stream lives in streaming.cpp). RAPL reads run on the connection's
// thread (RaplCpu is thread-safe).

#include "device_slots.hpp"
#include "erg/daemon/request_handler.hpp"
#include "erg/protocol/query.hpp"

namespace erg::daemon {

Reply cpu_get_cumulative_energy(const DeviceSlots& devices, const protocol::Query& query);
/// Two reads one CPU poll period (1 / `poll_hz`) apart, like zeusd: blocks that long.
Reply cpu_get_power(const DeviceSlots& devices, const protocol::Query& query, double poll_hz);

}  // namespace erg::daemon
