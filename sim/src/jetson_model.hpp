#pragma once
// Internal: the Jetson rail model over State::jetson. Control-API side only (the simulated
// drivers never touch it). Call under the state's lock.
//
// Physics: each rail draws its mean power with seeded noise, constant within a 1 ms step (the
// true energy is an exact sum); the module's input rail (Orin Nano VDD_IN) carries every other
// rail plus its own share.
// Sensor (TI INA3221 in continuous mode, as the Linux driver runs it): per chip, the enabled
// channels are converted in turn, shunt voltage then bus voltage, each conversion `conversion_ns`
// long (1.1 ms: the chip's default); `samples` rounds are averaged. So a channel's current is
// the mean over its own shunt-conversion slots only (a sixth of the time on a three-channel chip
// at one sample), and its reading changes once per update_interval = channels × samples × 2 ×
// conversion. Readings are quantised as the chip does (shunt 40 µV, bus 8 mV) with about one LSB
// of conversion noise, and the shunt's real resistance is off its nominal value by a seeded
// amount within 1 %; the driver divides by the nominal value.

#include <cstdint>

#include "erg/sim/jetson.hpp"
#include "state.hpp"

namespace erg::sim::detail {

/// Fills State::jetson for `layout` at sim time `now` (faithful: noise, gain errors, phase).
void init_jetson(State& s, JetsonLayout layout, std::int64_t now);
/// Brings the rails up to `now` (physics and published readings).
void advance_jetson(State& s, std::int64_t now);
/// The chip's update interval in ms as the driver reports it.
unsigned jetson_update_interval_ms(const State& s, unsigned rail);

}  // namespace erg::sim::detail
