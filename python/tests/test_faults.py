"""The fault matrix, Python monitor face (docs/fault-matrix.md).

Every fault the simulator can give a GPU, halfway through a window of erg.EnergyMonitor (and of
the Zeus-compatible ZeusMonitor): GPU 3's figure is within 1 % of its sensor's with the fault
flagged in ``gpu_faults``, or ``None`` with an error naming it and left out of the totals, which
say so in ``missing_devices``. GPU 2, never faulted, stays exact and unflagged."""

import logging
import time

import pytest

import erg
import erg.sim

FAULTY, HEALTHY = 3, 2
TOL = 0.01
EDGE_SLACK_J = 2.0  # the gap between reading the sim's clock and the edge call (see test_monitor)


@pytest.fixture
def busy(machine):
    for g in (FAULTY, HEALTHY):
        machine.set_utilization(g, 0.8)
    time.sleep(0.25)
    yield machine
    for g in (FAULTY, HEALTHY):
        machine.clear_faults(g)
        machine.set_utilization(g, 0.0)


def test_the_fault_names_are_the_clis():
    assert erg.sim.FAULTS == ["backwards", "reset", "error", "errors3", "timeout", "lost"]


def test_an_unknown_fault_is_an_error(machine):
    with pytest.raises(erg.InvalidArgumentError, match="unknown fault 'melt'"):
        machine.inject_fault(0, "melt")


@pytest.mark.parametrize("kind", erg.sim.FAULTS)
def test_energy_monitor_flags_or_refuses(busy, kind):
    m = busy
    mon = erg.EnergyMonitor(gpu_indices=[HEALTHY, FAULTY], cpu_indices=[], settle=True)
    time.sleep(0.5)  # the follower learns the counters' schedules
    t0 = m.now()
    mon.begin_window("w")
    time.sleep(1.0)
    m.inject_fault(FAULTY, kind)
    time.sleep(1.0)
    t1 = m.now()
    r = mon.end_window("w")
    time.sleep(0.3)  # the sensor's figure for t1 needs the update after it

    healthy = m.sensor_energy_at(HEALTHY, t1) - m.sensor_energy_at(HEALTHY, t0)
    assert abs(r.gpu_energy[HEALTHY] - healthy) <= TOL * healthy + EDGE_SLACK_J
    assert HEALTHY not in r.gpu_faults

    assert r.affected
    faults = r.gpu_faults[FAULTY]
    if kind in ("timeout", "lost"):
        assert r.gpu_energy[FAULTY] is None
        assert faults["error_code"] == ("gpu_lost" if kind == "lost" else "timeout")
        assert "GPU 3" in r.errors["gpu3"]
        assert r.missing_devices == ["gpu3"]
        assert r.gpu_energy_total == pytest.approx(r.gpu_energy[HEALTHY])
        return
    truth = m.sensor_energy_at(FAULTY, t1) - m.sensor_energy_at(FAULTY, t0)
    err = abs(r.gpu_energy[FAULTY] - truth)
    if kind in ("backwards", "reset") and faults["error_bound"] > 0:
        # The step fell within the few ms around a counter update (the follower reads just
        # before and just after each one): that update is estimated, and the figure holds the
        # bound it states. Otherwise (nearly always) nothing is estimated: within 1 %.
        assert faults["bridged"] > 0
        assert err <= faults["error_bound"] + TOL * truth + EDGE_SLACK_J, (r.gpu_energy[FAULTY], truth, faults)
    else:
        assert err <= TOL * truth + EDGE_SLACK_J, (r.gpu_energy[FAULTY], truth, faults)
    assert r.missing_devices == []
    expected = {"backwards": ("counter_backwards", 1), "reset": ("counter_restarts", 1),
                "error": ("read_errors", 1), "errors3": ("read_errors", 3)}[kind]
    assert faults[expected[0]] >= expected[1], faults
    if kind in ("backwards", "reset"):
        assert (faults["bridged"] > 0) == (faults["error_bound"] > 0), faults


@pytest.mark.parametrize("kind", ["timeout", "lost"])
def test_zeus_monitor_gives_nan_not_zero(busy, kind, caplog):
    # Zeus's measurement types carry floats: an unknown GPU energy is NaN there (never 0.0), with
    # a warning (a log record on Zeus's logger, as the compat layer warns) saying why.
    from erg.compat.zeus import ZeusMonitor

    mon = ZeusMonitor(gpu_indices=[HEALTHY, FAULTY], cpu_indices=[])
    mon.begin_window("w")
    time.sleep(0.5)
    busy.inject_fault(FAULTY, kind)
    time.sleep(0.5)
    with caplog.at_level(logging.WARNING, logger="zeus.monitor.energy"):
        r = mon.end_window("w")
    assert any(rec.name == "zeus.monitor.energy" and rec.levelno == logging.WARNING
               and "Energy of gpu3 is unknown (NaN)" in rec.getMessage() for rec in caplog.records)
    assert r.gpu_energy[HEALTHY] > 0
    assert r.gpu_energy[FAULTY] != r.gpu_energy[FAULTY]  # NaN
