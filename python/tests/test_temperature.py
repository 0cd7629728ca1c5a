"""erg.TemperatureMonitor: GPU temperature from a native thread (the simulated GPU's temperature
follows its instant power reading: 30 °C + 45 °C x power / maximum limit, sim/README.md)."""

import time

import numpy as np
import pytest

import erg


def test_api():
    assert "TemperatureMonitor" in erg.__all__
    with erg.TemperatureMonitor(gpu_indices=[0, 1], period=0.05, max_samples=100) as tm:
        assert tm.gpu_indices == [0, 1] and tm.period == pytest.approx(0.05) and tm.errors == {}
        assert tm.sampled(0) and not tm.sampled(2)
        t, c = tm.timeline(0)
        assert t.dtype == np.float64 and c.dtype == np.int32 and len(t) == len(c) >= 1  # first round at once
        assert isinstance(tm.temperature(0), int)
        with pytest.raises(erg.NotFoundError):
            tm.temperature(2)  # not monitored
    with pytest.raises(erg.InvalidArgumentError, match="GPU index 9 is out of range"):
        erg.TemperatureMonitor(gpu_indices=[9])
    with pytest.raises(erg.InvalidArgumentError, match="period must be positive"):
        erg.TemperatureMonitor(period=0)


def test_follows_the_load(machine):
    tm = erg.TemperatureMonitor(gpu_indices=[1, 3], period=0.05)
    try:
        t0 = erg.monotonic()
        idle = tm.temperature(1)
        machine.set_utilization(1, 1.0)
        time.sleep(0.6)
        hot = tm.temperature(1)
        assert hot > idle and hot > tm.temperature(3)
        t, c = tm.timeline(1, start=t0)
        assert c[-1] == hot and all(a != b for a, b in zip(c, c[1:]))  # stored only when it changed
        assert np.all(np.diff(t) > 0) and t[0] >= t0 - 1
        assert tm.temperature(1, time=t[0]) == c[0]  # nearest reading to a time
    finally:
        machine.set_utilization(1, 0.0)
        tm.stop()
    rounds = tm._t.rounds
    time.sleep(0.15)
    assert tm._t.rounds == rounds  # stopped
