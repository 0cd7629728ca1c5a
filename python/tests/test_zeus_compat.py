"""Acceptance 4: Zeus scripts run by changing only their imports (reference/zeus.md §1, §9 1-4)."""

import csv
import time
import warnings

import pytest

from erg.compat.zeus import Measurement, PowerDomain, PowerMonitor, ZeusMonitor

ZERO_WARNING = (
    "The energy consumption of one or more GPUs was measured as zero. This means that the time duration "
    "of the measurement window was shorter than the GPU's energy counter update period. Consider turning "
    "on the `approx_instant_energy` option in `ZeusMonitor`, which approximates the energy consumption of "
    "a short time window as instant power draw x window duration."
)


def test_zeus_readme_example(machine, capsys):
    for g in range(4):
        machine.set_utilization(g, 0.6)
    train_loader = [(i, i) for i in range(3)]
    # ---- Zeus README example; only the import changed (was: from zeus.monitor import ZeusMonitor)
    from erg.compat.zeus import ZeusMonitor

    # All four GPUs are measured simultaneously.
    monitor = ZeusMonitor(gpu_indices=[0,1,2,3])

    # Measure total time and energy within the window.
    monitor.begin_window("training")
    for e in range(2):

        # Measure time and energy spent in one epoch.
        monitor.begin_window("epoch")
        for x, y in train_loader:
            # Train on (x, y)
            time.sleep(0.07)

        measurement = monitor.end_window("epoch")
        print(f"Epoch {e}: {measurement.time} s, {measurement.total_energy} J")

    measurement = monitor.end_window("training")
    print(f"Entire training: {measurement.time} s, {measurement.total_energy} J")
    # ---- end of the example
    out = capsys.readouterr().out
    assert "Epoch 0:" in out and "Epoch 1:" in out and "Entire training:" in out
    assert isinstance(measurement, Measurement)
    assert measurement.total_energy == pytest.approx(sum(measurement.gpu_energy.values()))
    assert set(measurement.gpu_energy) == {0, 1, 2, 3} and measurement.total_energy > 0
    assert set(measurement.cpu_energy) == {0, 1}
    for g in range(4):
        machine.set_utilization(g, 0.0)


@pytest.mark.filterwarnings("ignore:The energy consumption")
def test_error_messages_and_restart(machine):
    mon = ZeusMonitor(gpu_indices=[0])
    mon.begin_window("a")
    with pytest.raises(ValueError, match=r"^Measurement window 'a' already exists$"):
        mon.begin_window("a")
    mon.begin_window("a", restart=True)
    mon.begin_window("fresh", restart=True)  # restart works on a key that does not exist
    mon.end_window("a")
    mon.end_window("fresh")
    with pytest.raises(ValueError, match=r"^Measurement window 'a' does not exist$"):
        mon.end_window("a")
    mon.begin_window("c")
    m = mon.end_window("c", cancel=True)
    assert m.time == 0.0 and m.gpu_energy == {0: 0.0} and m.cpu_energy == {0: 0.0, 1: 0.0}


def test_csv_log(machine, tmp_path):
    path = tmp_path / "sub" / "log.csv"
    mon = ZeusMonitor(gpu_indices=[1, 3], log_file=path)
    assert path.read_text() == "start_time,window_name,elapsed_time,gpu1_energy,gpu3_energy\n"
    before = time.time()
    mon.begin_window("one")
    mon.begin_window("two")
    time.sleep(0.25)
    m2 = mon.end_window("two")
    m1 = mon.end_window("one")
    mon.begin_window("cancelled")
    mon.end_window("cancelled", cancel=True)  # no row
    rows = list(csv.reader(path.open()))
    assert rows[0] == ["start_time", "window_name", "elapsed_time", "gpu1_energy", "gpu3_energy"]
    assert [r[1] for r in rows[1:]] == ["two", "one"]  # end order
    assert before - 1 < float(rows[1][0]) < time.time()
    assert float(rows[1][2]) == m2.time and float(rows[2][3]) == m1.gpu_energy[1]


def test_zero_energy_warning(machine):
    machine.set_utilization(0, 1.0)
    mon = ZeusMonitor(gpu_indices=[0])
    # Windows much shorter than the A100's 100 ms counter period, with plain counter differences
    # (as Zeus): the counter almost never moves, so the energy is exactly 0.0.
    for _ in range(20):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            mon.begin_window("tiny")
            m = mon.end_window("tiny")
        if m.gpu_energy[0] == 0.0:
            break
    assert m.gpu_energy[0] == 0.0
    assert [str(x.message) for x in w] == [ZERO_WARNING]
    assert all(x.category is UserWarning for x in w)
    approx = ZeusMonitor(gpu_indices=[0], approx_instant_energy=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        approx.begin_window("tiny")
        approx.end_window("tiny")  # no warning with approx_instant_energy
    machine.set_utilization(0, 0.0)


def test_power_monitor(machine):
    machine.set_utilization(2, 1.0)
    time.sleep(0.25)  # the A100's power sensor updates every 100 ms: let it show the new load
    pm = PowerMonitor(gpu_indices=[2], update_period=0.05, power_domains=["device_instant", PowerDomain.DEVICE_INSTANT])
    try:
        t0 = time.time()
        time.sleep(0.4)
        t1 = time.time()
        p = pm.get_power()
        # the sensor reports the load's mean power times its gain error, with update noise and
        # ripple left (simulated); machine.power() would be one noisy 1 ms physics step
        seen = machine.mean_power(2) * (1 + machine.sensor_info(2)["gain"])
        assert set(p) == {2} and p[2] == pytest.approx(seen, rel=0.05)
        tl = pm.get_power_timeline(PowerDomain.DEVICE_INSTANT)
        assert set(tl) == {2} and all(isinstance(t, float) and isinstance(w, float) for t, w in tl[2])
        assert all(t0 - 5 < t < t1 + 5 for t, _ in tl[2])  # time.time() timestamps, as Zeus
        assert set(pm.get_all_power_timelines()) == {"device_instant"}  # duplicates removed
        e = pm.get_energy(t0, t1)
        assert e[2] == pytest.approx(seen * (t1 - t0), rel=0.1)
        with pytest.raises(ValueError, match="Power domain memory_average is not being monitored"):
            pm.get_power(power_domain="memory_average")
        with pytest.raises(ValueError, match="^Power domain device_average is not being monitored"):
            pm.get_power_timeline("device_average")
    finally:
        pm.stop()
        machine.set_utilization(2, 0.0)
    with pytest.raises(ValueError):
        PowerMonitor(gpu_indices=[])
    with pytest.raises(ValueError):
        PowerMonitor(power_domains=[])
    # The simulated A100 has no average domains: asking for one is a ValueError, as in Zeus.
    with pytest.raises(ValueError):
        PowerMonitor(gpu_indices=[0], update_period=0.05, power_domains=["memory_average"])
