"""erg.profile and erg.compat.zeus.profile on the simulated machine (real clock, durations of a
fraction of a second): a steady GPU gives a valid sweep, one with an injected thermal drift an
invalid one, found from the measurements alone. The algorithm's details (order, counts, defaults,
reduction) are tested natively on a virtual clock (optimizers/profile/tests)."""

import logging

import pytest

import erg
import erg.profile
from erg.compat.zeus import profile as zprofile
from erg.compat.zeus.monitor import ZeusMonitor

GPU = 3  # this file's GPU: the drift stays off it after each test


def work(machine, units=0.02):
    """One iteration: 20 ms of work at full clock (~25 ms under the A100's 400 W limit, ~8 J)."""
    return lambda: machine.run_work(GPU, units)


def sweep(machine, threshold):
    monitor = erg.EnergyMonitor(gpu_indices=[GPU], settle=True)
    return erg.profile.profile_measurement_duration(
        work(machine), monitor, [0.4], cooldown_duration=0.05, num_trials=4, num_warmup_trials=1,
        trial_stddev_threshold=threshold, num_warmup_iterations=2, num_calibration_iterations=5,
    )


def test_steady_gpu_is_valid_and_drifting_gpu_is_not(machine):
    # 0.45 J is about 5 % of an iteration's energy: wide for a steady GPU on a busy machine (the
    # real clock's scheduling noise reached 0.26 J with a load average of 10), half the spread
    # of the drift below (~9 % more per trial over four trials: a standard deviation near 0.9 J).
    threshold = 0.45
    steady = sweep(machine, threshold=threshold)
    e = steady.entries[0]
    print("simulated A100, steady:", e)
    assert e.is_valid, str(e)
    assert 4.0 < e.energy_mean < 15.0
    assert len(e.trials) == 4 and all(t.iterations >= 10 for t in e.trials)
    assert steady.sweep_param == ("measurement_duration", [0.4])
    assert steady.fixed_param == ("cooldown_duration", 0.05)

    # 40 °C per second of work, 0.5 %/°C: each trial (~0.45 s of work) costs ~8 % more per iteration.
    machine.set_thermal_drift(GPU, 40.0, leakage_per_celsius=0.005, max_rise_celsius=100.0)
    try:
        drifting = sweep(machine, threshold=threshold)
    finally:
        machine.set_thermal_drift(GPU, 0.0)
    d = drifting.entries[0]
    print("simulated A100, thermal drift:", d)
    assert not d.is_valid, str(d)
    energies = [t.energy_per_iter for t in d.trials]
    assert energies == sorted(energies), energies  # what the profiler saw: rising, trial after trial
    assert d.trials[-1].temperature_before > d.trials[0].temperature_before
    assert "[INVALID]" in str(drifting) and "[VALID]" in str(steady)


def test_measure_over_a_meter_object_with_a_reduction_hook():
    calls = []

    class Meter:
        def __init__(self):
            self.t = 0.0
            self.begun = None

        def sync(self):
            calls.append("sync")

        def begin_window(self):
            self.begun = self.t

        def end_window(self):
            span, self.begun = self.t - self.begun, None
            return (span, 2.0 * span / 0.001)

        def cancel_window(self):
            calls.append("cancel")

        def temperature(self):
            return 40.0

    meter = Meter()

    def step():
        import time
        meter.t += 0.001
        time.sleep(0.0005)

    def all_reduce(value, op):  # two ranks, the other one identical
        return 2 * value if op == "sum" else value

    r = erg.profile.measure(step, meter, 0.05, 0.0, num_warmup_iterations=2, num_calibration_iterations=5,
                            all_reduce=all_reduce)
    assert isinstance(r, erg.profile.TrialResult)
    assert r.iterations >= 1
    assert r.energy_per_iter == pytest.approx(4.0)  # 2 J per iteration on each of two ranks
    assert r.temperature_before == 40.0
    assert calls.count("sync") == 3  # calibration's two, and the trial's

    def boom():
        step()
        if meter.begun is not None:
            raise KeyError("target failed")

    meter.begun = None
    with pytest.raises(KeyError):
        erg.profile.measure(boom, meter, 0.05, 0.0, num_warmup_iterations=0, num_calibration_iterations=3)
    assert calls[-1] == "cancel"
    with pytest.raises(erg.InvalidArgumentError):
        erg.profile.profile_cooldown_duration(step, meter, [1.0], num_trials=0, iteration_duration=0.001)


def test_zeus_names_over_a_zeus_monitor(machine, caplog):
    monitor = ZeusMonitor(gpu_indices=[GPU])
    with caplog.at_level(logging.INFO, logger="zeus.profile"):
        r = zprofile.measure(work(machine), monitor, measurement_duration=0.2, cooldown_duration=0.05,
                             num_warmup_iterations=2, num_calibration_iterations=5)
    assert isinstance(r, zprofile.TrialResult) and zprofile.TrialResult is erg.profile.TrialResult
    assert r.total_energy > 0 and r.total_time > 0 and r.iterations >= 1
    assert r.energy_per_iter == pytest.approx(r.total_energy / r.iterations)
    assert r.time_per_iter == pytest.approx(r.total_time / r.iterations)
    assert any("Calibrated iteration duration" in rec.getMessage() for rec in caplog.records)
    assert "__zeus_profile_run_trial" not in getattr(monitor, "measurement_states", {})
    with pytest.raises(ValueError):
        zprofile.measure(work(machine), monitor, 0.1, 0.0, warmup_settle_duration=-1.0)
    report = zprofile.profile_cooldown_duration(
        work(machine), monitor, [0.0, 0.05], measurement_duration=0.1, num_trials=2, num_warmup_trials=0,
        iteration_duration=0.005,
    )
    assert report.sweep_param == ("cooldown_duration", [0.0, 0.05])
    assert [e.cooldown_duration for e in report.entries] == [0.0, 0.05]
    assert all(len(e.trials) == 2 for e in report.entries)
