"""erg.compat.zeus.monitor.temperature against reference/zeus.md §1.3: names, signatures,
attributes, return types (time.time() seconds, int °C), deduplication, nearest lookups, errors
and log records."""

import logging
import time
from dataclasses import fields

import pytest
from zeus_helpers import params

import erg
from erg.compat.zeus.monitor import temperature as temperature_module
from erg.compat.zeus.monitor.temperature import TemperatureMonitor, TemperatureSample


def test_public_names_and_signatures():
    assert temperature_module.__all__ == ["TemperatureSample", "TemperatureMonitor"]
    assert [f.name for f in fields(TemperatureSample)] == ["timestamp", "gpu_index", "temperature_c"]
    assert params(TemperatureMonitor.__init__) == [
        ("gpu_indices", None), ("update_period", 1.0), ("max_samples_per_gpu", None),
    ]
    assert params(TemperatureMonitor.get_temperature_timeline) == [
        ("gpu_index", None), ("start_time", None), ("end_time", None),
    ]
    assert params(TemperatureMonitor.get_temperature) == [("time", None)]
    assert params(TemperatureMonitor.stop) == []


def test_follows_the_gpu(machine, caplog):
    t0 = time.time()
    with caplog.at_level(logging.INFO, logger="zeus.monitor.temperature"):
        tm = TemperatureMonitor(gpu_indices=[1, 3], update_period=0.05)
    assert [(r.name, r.levelno, r.getMessage()) for r in caplog.records] == [
        ("zeus.monitor.temperature", logging.INFO, "Monitoring temperature of GPUs [1, 3]"),
    ]
    try:
        assert tm.gpu_indices == [1, 3] and tm.update_period == 0.05
        idle = tm.get_temperature()
        assert set(idle) == {1, 3} and all(type(c) is int for c in idle.values())
        machine.set_utilization(1, 1.0)
        time.sleep(0.6)
        hot = tm.get_temperature()
        assert hot[1] > idle[1] and hot[1] > hot[3]
        t1 = time.time()
        tl = tm.get_temperature_timeline()
        assert set(tl) == {1, 3}
        for samples in tl.values():
            assert all(type(t) is float and type(c) is int for t, c in samples)
            assert all(t0 - 1 < t < t1 + 1 for t, _ in samples)  # time.time() seconds
            assert all(a[1] != b[1] for a, b in zip(samples, samples[1:]))  # a reading only when it changed
        assert set(tm.get_temperature_timeline(gpu_index=1)) == {1}
        assert tm.get_temperature_timeline(gpu_index=0) == {}  # not monitored
        (ta, ca), (tb, cb) = tl[1][-2], tl[1][-1]
        assert tm.get_temperature(time=ta + 0.4 * (tb - ta))[1] == ca
        assert tm.get_temperature(time=ta + 0.6 * (tb - ta))[1] == cb
        assert tm.get_temperature_timeline(start_time=tb, end_time=tb)[1] == [(tb, cb)]  # inclusive bounds
    finally:
        machine.set_utilization(1, 0.0)
        tm.stop()
        tm.stop()  # idempotent
    n = len(tm.get_temperature_timeline()[1])
    time.sleep(0.15)
    assert len(tm.get_temperature_timeline()[1]) == n  # stopped


def test_max_samples_per_gpu(machine):
    tm = TemperatureMonitor(gpu_indices=[2], update_period=0.02, max_samples_per_gpu=2)
    try:
        machine.set_utilization(2, 1.0)
        time.sleep(0.5)
        assert len(tm.get_temperature_timeline()[2]) <= 2
    finally:
        machine.set_utilization(2, 0.0)
        tm.stop()


def test_errors(machine):
    with pytest.raises(ValueError, match="^`gpu_indices` must be either `None` or non-empty$"):
        TemperatureMonitor(gpu_indices=[])
    with pytest.raises(IndexError) as e:
        TemperatureMonitor(gpu_indices=[4])
    assert isinstance(e.value, erg.InvalidArgumentError)
