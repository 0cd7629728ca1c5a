"""erg.compat.zeus.monitor.power against reference/zeus.md §1.2, §9 (4), §12.3: names, signatures,
attributes, errors, log records (logging, not warnings), the update-period inference, and
get_energy: never energy for time not lived, correct energy at constant power."""

import logging
import time
import warnings
from dataclasses import fields

import pytest
from zeus_helpers import CAPTURE_LOGS, EMPTY, params, run_child

import erg
from erg.compat.zeus.monitor import power as power_module
from erg.compat.zeus.monitor.power import PowerDomain, PowerMonitor, PowerSample, infer_counter_update_period


@pytest.fixture
def busy(machine):
    machine.set_utilization(2, 1.0)
    time.sleep(0.25)  # the A100's power reading updates every 100 ms: let it show the load
    yield machine
    machine.set_utilization(2, 0.0)


def test_public_names_and_signatures():
    assert power_module.__all__ == ["infer_counter_update_period", "PowerDomain", "PowerSample", "PowerMonitor"]
    assert [(d.name, d.value) for d in PowerDomain] == [
        ("DEVICE_INSTANT", "device_instant"), ("DEVICE_AVERAGE", "device_average"), ("MEMORY_AVERAGE", "memory_average"),
    ]
    assert [f.name for f in fields(PowerSample)] == ["timestamp", "gpu_index", "power_mw"]
    assert params(infer_counter_update_period) == [("gpu_indices", EMPTY)]
    assert params(PowerMonitor.__init__) == [
        ("gpu_indices", None), ("update_period", None), ("max_samples_per_gpu", None), ("power_domains", None),
    ]
    assert params(PowerMonitor.get_power_timeline) == [
        ("power_domain", EMPTY), ("gpu_index", None), ("start_time", None), ("end_time", None),
    ]
    assert params(PowerMonitor.get_all_power_timelines) == [("gpu_index", None), ("start_time", None), ("end_time", None)]
    assert params(PowerMonitor.get_energy) == [("start_time", EMPTY), ("end_time", EMPTY), ("power_domain", None)]
    assert params(PowerMonitor.get_power) == [("time", None), ("power_domain", PowerDomain.DEVICE_INSTANT)]
    assert params(PowerMonitor.stop) == []


def test_attributes_and_timelines(busy):
    t0 = time.time()
    pm = PowerMonitor(gpu_indices=[2, 3], update_period=0.05, max_samples_per_gpu=1000)
    try:
        assert pm.gpu_indices == [2, 3] and pm.update_period == 0.05
        assert pm.measurement_domains == [PowerDomain.DEVICE_INSTANT]  # what the A100 supports
        assert len(pm.gpus) == 4
        time.sleep(0.4)
        t1 = time.time()
        tl = pm.get_power_timeline("device_instant")
        assert set(tl) == {2, 3}
        for samples in tl.values():
            assert samples and all(type(t) is float and type(w) is float for t, w in samples)
            assert all(t0 - 1 < t < t1 + 1 for t, _ in samples)  # time.time() seconds
            assert [t for t, _ in samples] == sorted(t for t, _ in samples)
            assert all(a[1] != b[1] for a, b in zip(samples, samples[1:]))  # equal readings stored once
        assert set(pm.get_power_timeline(PowerDomain.DEVICE_INSTANT, gpu_index=3)) == {3}
        everything = pm.get_all_power_timelines(start_time=t0, end_time=t1)
        assert set(everything) == {"device_instant"} and set(everything["device_instant"]) == {2, 3}
        assert set(pm.get_all_power_timelines(gpu_index=3)["device_instant"]) == {3}
        p = pm.get_power()
        # busy.power(2) is the model's power in the current 1 ms step (noise σ 1.5 %); the reading
        # carries the sensor's gain error (up to ±2 %) and is up to one update old: 5.4 % apart was
        # seen on a loaded machine, so 10 % (the gap to the idle GPU is far larger).
        assert set(p) == {2, 3} and p[2] == pytest.approx(busy.power(2), rel=0.1) and p[2] > p[3]
        e = pm.get_energy(t0 + 0.1, t1)
        assert e[2] == pytest.approx(busy.power(2) * (t1 - t0 - 0.1), rel=0.1)
    finally:
        pm.stop()
        pm.stop()  # idempotent


def test_get_power_takes_the_nearest_sample(busy):
    # (Ties go to the earlier sample: pinned exactly by the native tests; a wall-clock midpoint
    # does not survive the float conversions.)
    pm = PowerMonitor(gpu_indices=[2], update_period=0.02)
    time.sleep(0.5)
    pm.stop()
    samples = pm.get_power_timeline("device_instant")[2]
    assert len(samples) >= 2
    (ta, wa), (tb, wb) = samples[0], samples[1]
    assert pm.get_power(time=ta + 0.4 * (tb - ta)) == {2: wa}
    assert pm.get_power(time=ta + 0.6 * (tb - ta)) == {2: wb}
    assert pm.get_power(time=ta - 100) == {2: wa}
    # Inclusive bounds, even when copied from a returned timestamp.
    assert pm.get_power_timeline("device_instant", 2, start_time=tb, end_time=tb) == {2: [(tb, wb)]}


def test_errors(machine):
    with pytest.raises(ValueError, match="^`gpu_indices` must be either `None` or non-empty$"):
        PowerMonitor(gpu_indices=[])
    with pytest.raises(ValueError, match="^`power_domains` must be either `None` or non-empty$"):
        PowerMonitor(power_domains=[])
    with pytest.raises(ValueError, match=r"^Requested power domain memory_average is not supported\. "
                                         r"Supported domains are: \['device_instant'\]\.$") as e:
        PowerMonitor(gpu_indices=[0], update_period=0.05, power_domains=["memory_average"])
    assert isinstance(e.value, erg.InvalidArgumentError)
    with pytest.raises(ValueError):
        PowerMonitor(gpu_indices=[0], update_period=0.05, power_domains=["bogus"])
    # Deliberate difference: a GPU that does not exist fails here (Zeus: its polling process dies
    # and get_power() returns None from then on).
    with pytest.raises(IndexError) as e:
        PowerMonitor(gpu_indices=[7], update_period=0.05)
    assert isinstance(e.value, erg.InvalidArgumentError)
    pm = PowerMonitor(gpu_indices=[0], update_period=0.05)
    try:
        with pytest.raises(ValueError, match=r"^Power domain device_average is not being monitored\. "
                                             r"Monitored domains: \['device_instant'\]$"):
            pm.get_power_timeline("device_average")
        with pytest.raises(ValueError, match=r"^Power domain memory_average is not being monitored\. Monitored "
                                             r"domains: \['device_instant'\]\. Pass one of the monitored domains "
                                             r"to the `power_domain` parameter\.$"):
            pm.get_power(power_domain="memory_average")
        with pytest.raises(ValueError, match="is not being monitored"):
            pm.get_energy(time.time() - 1, time.time(), power_domain=PowerDomain.DEVICE_AVERAGE)
    finally:
        pm.stop()


def test_warnings_are_log_records_not_warnings(machine, caplog):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a `warnings` warning would fail here
        with caplog.at_level(logging.INFO, logger="zeus.monitor.power"):
            pm = PowerMonitor(gpu_indices=[1], update_period=0.01)
            pm.stop()
    got = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "zeus.monitor.power"]
    assert (logging.INFO, "Monitoring power usage of GPUs [1]") in got
    assert (logging.WARNING, "An update period of 0.01 might be too fast, which may lead to unexpected errors "
            "(e.g., NotSupported) and/or zero values being returned. If you see these, consider increasing "
            "to >= 0.05.") in got


def test_infer_counter_update_period_halves_the_fastest_model(machine, monkeypatch, caplog):
    # §9.4: models updating every 0.4 s and 0.12 s → 0.06 s; each model polled once.
    names = {0: "model A", 1: "model B", 2: "model A", 3: "model B"}
    periods = {0: 0.4, 1: 0.12}
    polled = []
    gpus = power_module.get_gpus()
    monkeypatch.setattr(gpus, "get_name", lambda i: names[i])
    monkeypatch.setattr(power_module, "_infer_counter_update_period_single", lambda i: polled.append(i) or periods[i])
    assert infer_counter_update_period([0, 1, 2, 3]) == pytest.approx(0.06)
    assert polled == [0, 1]
    with caplog.at_level(logging.WARNING, logger="zeus.monitor.power"):
        assert infer_counter_update_period([0]) == 0.1  # 0.2 s is too long: capped
    assert [r.getMessage() for r in caplog.records] == ["Inferred update period (0.20 s) is too long. Using 0.1 s instead."]


def test_infer_counter_update_period_on_the_simulated_a100(machine):
    machine.set_utilization(0, 0.7)
    try:
        period = infer_counter_update_period([0])
    finally:
        machine.set_utilization(0, 0.0)
    info = machine.sensor_info(0)
    assert period == pytest.approx(info["power_period"] / 2, rel=0.3)  # half the sensor's period


def test_get_energy_never_counts_time_not_lived(busy):
    t0 = time.time()
    pm = PowerMonitor(gpu_indices=[2], update_period=0.05)
    try:
        time.sleep(0.3)
        now = time.time()
        assert pm.get_energy(now + 10, now + 20) == {2: 0.0}  # all in the future (Zeus: no sample, 0.0)
        partly = pm.get_energy(t0, time.time() + 100)  # cut at now
        after = time.time()
        lived = pm.get_energy(t0, after)
        assert 0 < partly[2] <= lived[2] <= partly[2] + busy.power(2) * (after - now + 0.05)
        assert pm.get_energy(t0 - 60, t0 - 30) == {2: 0.0}  # before the monitor: nothing known
        assert pm.get_energy(t0 - 60, after)[2] == pytest.approx(lived[2], rel=0.05)  # from the first sample
    finally:
        pm.stop()
    stopped = pm.get_energy(t0, time.time())
    time.sleep(0.2)
    assert pm.get_energy(t0, time.time()) == stopped  # nothing after stop() is counted


CONSTANT = r"""
import json, time
import erg.sim
from erg.compat.zeus.monitor.power import PowerMonitor
m = erg.sim.current()
m.set_utilization(0, 0.5)
time.sleep(0.3)
pm = PowerMonitor(gpu_indices=[0], update_period=0.05)
t0 = time.time(); time.sleep(0.5); t1 = time.time()
e = pm.get_energy(t0, t1)[0]
samples = pm.get_power_timeline("device_instant", 0, t0, t1)[0]
pm.stop()
print(json.dumps({"energy": e, "samples": len(samples), "power": m.power(0), "span": t1 - t0}))
"""


def test_constant_power_is_not_zero_energy():
    # Deliberate improvement (§12.3): with constant power the deduplicated timeline holds fewer
    # than two samples inside the window, so Zeus's trapezoid gives 0.0 J; erg holds the last
    # sample (the ideal model's power is constant).
    r = run_child(CONSTANT, "1xA100,ideal")
    assert r["samples"] < 2
    assert r["energy"] == pytest.approx(r["power"] * r["span"], rel=0.02)


H100 = CAPTURE_LOGS + r"""
import time
from erg.compat.zeus.monitor.power import PowerMonitor, PowerDomain
out = {}
pm = PowerMonitor(gpu_indices=[0], update_period=0.05)
out["all"] = [d.value for d in pm.measurement_domains]
pm.stop()
pm = PowerMonitor(gpu_indices=[0], update_period=0.05, power_domains=["memory_average", PowerDomain.MEMORY_AVERAGE])
out["mem"] = [d.value for d in pm.measurement_domains]
time.sleep(0.15)
try:
    pm.get_energy(time.time() - 1, time.time())
except ValueError as e:
    out["energy_error"] = str(e)
pm.stop()
pm = PowerMonitor(gpu_indices=[0], update_period=0.05, power_domains=["memory_average", "device_instant", "memory_average"])
out["ordered"] = [d.value for d in pm.measurement_domains]
pm.stop()
out["records"] = RECORDS
print(json.dumps(out))
"""


def test_domains_on_a_gpu_with_averages():
    r = run_child(H100, "1xH100")
    assert r["all"] == ["device_instant", "device_average", "memory_average"]
    assert r["mem"] == ["memory_average"]  # duplicates removed
    assert r["ordered"] == ["memory_average", "device_instant"]  # in the order asked (Zeus: set order)
    assert r["energy_error"] == ("Neither PowerDomain.DEVICE_INSTANT nor PowerDomain.DEVICE_AVERAGE is being "
                                 "monitored. Cannot compute energy usage.")
    assert ["zeus.monitor.power", "WARNING", "PowerDomain.DEVICE_INSTANT is not being monitored. Pass a monitored "
            "domain to the `power_domain` parameter of `get_power`."] in r["records"]


HETEROGENEOUS = r"""
import json, time
from erg.compat.zeus.device import get_gpus
from erg.compat.zeus.device.gpu import ZeusGPUHeterogeneousError
from erg.compat.zeus.monitor.power import PowerMonitor
out = {"gpus": len(get_gpus())}
try:
    get_gpus(ensure_homogeneous=True)
except ZeusGPUHeterogeneousError as e:
    out["error"] = str(e)
pm = PowerMonitor(update_period=0.05)
time.sleep(0.2)
out["power"] = sorted(pm.get_power())
out["domains"] = [d.value for d in pm.measurement_domains]
pm.stop()
pm = PowerMonitor(gpu_indices=[1], update_period=0.05)
out["h100_domains"] = [d.value for d in pm.measurement_domains]
pm.stop()
print(json.dumps(out))
"""


def test_heterogeneous_gpus_are_monitored():
    # get_gpus(ensure_homogeneous=True) raises, as Zeus, and on every call (Zeus checks only when
    # it builds its singleton, here already built by the first call). PowerMonitor (Zeus:
    # homogeneous GPUs only) samples each GPU in the domains it has, and probes the monitored
    # GPUs, not GPU 0 (§12.3): both deliberate improvements.
    r = run_child(HETEROGENEOUS, "1xA100,1xH100")
    assert r["gpus"] == 2 and r["error"].startswith("Heterogeneous GPUs found: ")
    assert r["power"] == [0, 1]
    assert r["domains"] == ["device_instant", "device_average", "memory_average"]
    assert r["h100_domains"] == ["device_instant", "device_average", "memory_average"]  # Zeus: GPU 0's
