"""erg.compat.zeus.monitor.energy against reference/zeus.md §1.1 and §9 (1-3): names, signatures,
attributes, errors (raised when, and of which built-in type), log records, the
approx_instant_energy arithmetic, and the deliberate differences of docs/migrating-from-zeus.md."""

import importlib.util
import logging
import math
import time
import types
from dataclasses import MISSING, fields

import pytest
from zeus_helpers import CAPTURE_LOGS, EMPTY, params, run_child

import erg
from erg.compat.zeus.device.cpu.common import CPUs, EmptyCPUs, ZeusCPUNoPermissionError
from erg.compat.zeus.device.gpu.common import GPUs
from erg.compat.zeus.device.soc.common import EmptySoC
from erg.compat.zeus.monitor import energy as energy_module
from erg.compat.zeus.monitor.energy import Measurement, MeasurementState, ZeusMonitor
from erg.compat.zeus.utils import framework


# Short windows measure 0 J and warn (through `warnings`, as Zeus); pinned in test_zeus_compat.py.
pytestmark = pytest.mark.filterwarnings("ignore:The energy consumption of one or more GPUs")


def test_public_names_and_signatures():
    assert energy_module.__all__ == ["Measurement", "MeasurementState", "ZeusMonitor"]
    assert params(ZeusMonitor.__init__) == [
        ("gpu_indices", None), ("cpu_indices", None), ("approx_instant_energy", False), ("log_file", None),
        ("sync_execution_with", "torch"),
    ]
    assert params(ZeusMonitor.begin_window) == [("key", EMPTY), ("sync_execution", True), ("restart", False)]
    assert params(ZeusMonitor.end_window) == [("key", EMPTY), ("sync_execution", True), ("cancel", False)]
    assert params(ZeusMonitor.reset_windows) == []
    assert [(f.name, f.default) for f in fields(Measurement)] == [
        ("time", MISSING), ("gpu_energy", MISSING), ("cpu_energy", None), ("dram_energy", None), ("soc_energy", None),
    ]
    assert [f.name for f in fields(MeasurementState)] == ["time", "gpu_energy", "cpu_energy", "dram_energy"]
    m = Measurement(time=1.0, gpu_energy={0: 2.0, 1: 3.0}, cpu_energy={0: 100.0})
    assert m.total_energy == 5.0  # GPU energy only, as Zeus


def test_attributes(machine):
    mon = ZeusMonitor(gpu_indices=[0, 1])
    assert isinstance(mon.gpus, GPUs) and len(mon.gpus) == 4
    assert isinstance(mon.cpus, CPUs) and len(mon.cpus) == 2
    assert isinstance(mon.soc, EmptySoC) and mon.soc_is_present is False
    assert mon.gpu_indices == [0, 1] and mon.cpu_indices == [0, 1]
    assert mon.approx_instant_energy is False and mon.sync_with == "torch" and mon.log_file is None
    assert mon.power_monitor is None  # every A100 has an energy counter
    assert mon.measurement_states == {}
    before = time.time()
    mon.begin_window("a", sync_execution=False)
    state = mon.measurement_states["a"]
    assert isinstance(state, MeasurementState)
    assert before <= state.time <= time.time()
    # The counters at the start, in joules (Zeus: mJ / 1000), keyed like the window.
    assert set(state.gpu_energy) == {0, 1} and set(state.cpu_energy) == {0, 1}
    assert 0 < state.gpu_energy[0] <= mon.gpus.get_total_energy_consumption(0) / 1000.0
    m = mon.end_window("a", sync_execution=False)
    assert mon.measurement_states == {}
    assert isinstance(m, Measurement) and m.soc_energy is None
    assert set(m.gpu_energy) == {0, 1} and set(m.cpu_energy) == {0, 1} and set(m.dram_energy) == {0, 1}
    none = ZeusMonitor(gpu_indices=[0], cpu_indices=[])
    none.begin_window("b", sync_execution=False)
    assert none.end_window("b", sync_execution=False).cpu_energy is None  # empty → None, as Zeus


def test_window_misuse_is_a_value_error(machine):
    mon = ZeusMonitor(gpu_indices=[0], cpu_indices=[])
    mon.begin_window("a", sync_execution=False)
    with pytest.raises(ValueError, match=r"^Measurement window 'a' already exists$") as e:
        mon.begin_window("a", sync_execution=False)
    assert isinstance(e.value, erg.AlreadyExistsError)
    first = mon.measurement_states["a"].time
    mon.begin_window("a", sync_execution=False, restart=True)  # replaces the open window
    assert mon.measurement_states["a"].time >= first
    mon.end_window("a", sync_execution=False)
    with pytest.raises(ValueError, match=r"^Measurement window 'a' does not exist$") as e:
        mon.end_window("a", sync_execution=False)
    assert isinstance(e.value, erg.NotFoundError)


def test_reset_windows_cancels_every_open_window(machine, caplog):
    mon = ZeusMonitor(gpu_indices=[0], cpu_indices=[])
    mon.begin_window("a", sync_execution=False)
    mon.begin_window("b", sync_execution=False)
    with caplog.at_level(logging.INFO, logger="zeus.monitor.energy"):
        mon.reset_windows()
    assert mon.measurement_states == {}
    assert any(r.name == "zeus.monitor.energy" and "['a', 'b']" in r.getMessage() for r in caplog.records)
    with pytest.raises(ValueError, match="does not exist"):
        mon.end_window("a", sync_execution=False)
    mon.begin_window("a", sync_execution=False)  # no restart needed: the native window is gone too
    mon.end_window("a", sync_execution=False)


def test_bad_indices_are_index_errors_at_construction(machine):
    # Zeus: a bad GPU index fails in the constructor (supports_get_total_energy_consumption);
    # a bad CPU index at the first begin_window. erg: both in the constructor (documented).
    with pytest.raises(IndexError) as e:
        ZeusMonitor(gpu_indices=[4])
    assert isinstance(e.value, erg.InvalidArgumentError) and "GPU index 4" in str(e.value)
    with pytest.raises(IndexError) as e:
        ZeusMonitor(cpu_indices=[2])
    assert isinstance(e.value, erg.InvalidArgumentError) and "CPU index 2" in str(e.value)
    with pytest.raises(IndexError):
        ZeusMonitor(gpu_indices=[-1])


def test_rapl_without_permission(machine, monkeypatch):
    # §1.1: ZeusCPUNoPermissionError from get_cpus → RuntimeError only if CPU indices were asked
    # for; otherwise no CPU is measured, silently.
    def refused():
        raise ZeusCPUNoPermissionError("permission denied: /sys/class/powercap/intel-rapl:0/energy_uj")

    monkeypatch.setattr(energy_module, "get_cpus", refused)
    with pytest.raises(RuntimeError, match="^Root privilege is required to read RAPL metrics") as e:
        ZeusMonitor(gpu_indices=[0], cpu_indices=[0])
    assert isinstance(e.value, erg.NoPermissionError) and isinstance(e.value.__cause__, ZeusCPUNoPermissionError)
    for cpu_indices in (None, []):
        mon = ZeusMonitor(gpu_indices=[0], cpu_indices=cpu_indices)
        assert isinstance(mon.cpus, EmptyCPUs) and mon.cpu_indices == []


@pytest.mark.skipif(importlib.util.find_spec("jax") is not None, reason="needs JAX not installed")
def test_impossible_sync_is_a_runtime_error_at_begin_window(machine):
    mon = ZeusMonitor(gpu_indices=[0], sync_execution_with="jax")  # constructing is fine, as Zeus
    with pytest.raises(RuntimeError, match="^Failed to import JAX$") as e:
        mon.begin_window("w")
    assert isinstance(e.value, erg.UnavailableError)
    mon.begin_window("w", sync_execution=False)
    with pytest.raises(RuntimeError, match="^Failed to import JAX$"):
        mon.end_window("w")
    ZeusMonitor(gpu_indices=[], sync_execution_with="jax").begin_window("x")  # no GPU: no sync


def test_torch_without_cuda_is_a_runtime_error_off_the_simulator(machine, monkeypatch):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("needs PyTorch without CUDA")
    mon = ZeusMonitor(gpu_indices=[0])
    mon.begin_window("sim")  # simulated GPUs: nothing to synchronize (documented)
    mon.end_window("sim")
    monkeypatch.setattr(framework, "_no_cuda_on_simulated_machine", lambda _f: False)  # as on hardware
    with pytest.raises(RuntimeError, match="^PyTorch is available but does not have CUDA support.$"):
        mon.begin_window("hw")


def test_log_records(machine, tmp_path, caplog):
    with caplog.at_level(logging.DEBUG, logger="zeus"):
        mon = ZeusMonitor(gpu_indices=[1], cpu_indices=[0], log_file=tmp_path / "x" / "log.csv")
        mon.begin_window("w", sync_execution=False)
        mon.end_window("w", sync_execution=False)
        mon.begin_window("c", sync_execution=False)
        mon.end_window("c", sync_execution=False, cancel=True)
    got = [(r.name, r.levelno, r.getMessage()) for r in caplog.records if r.name == "zeus.monitor.energy"]
    assert got == [
        ("zeus.monitor.energy", logging.INFO, "Monitoring GPU indices [1]."),
        ("zeus.monitor.energy", logging.INFO, "Monitoring CPU indices [0]"),
        ("zeus.monitor.energy", logging.INFO, f"Writing measurement logs to {tmp_path / 'x' / 'log.csv'}."),
        ("zeus.monitor.energy", logging.DEBUG, "Measurement window 'w' started."),
        ("zeus.monitor.energy", logging.DEBUG, "Measurement window 'w' ended."),
        ("zeus.monitor.energy", logging.DEBUG, "Measurement window 'c' started."),
        ("zeus.monitor.energy", logging.DEBUG, "Measurement window 'c' cancelled."),
    ]


class _Native:
    """Stands in for erg's native monitor: a window of 0.5 s in which GPU 0's counter did not
    move (0.0 J) and GPU 1's moved by 7 J."""

    def begin_window(self, name, sync, restart):
        pass

    def end_window(self, name, sync):
        return types.SimpleNamespace(time=0.5, gpu_energy={0: 0.0, 1: 7.0}, cpu_energy={}, dram_energy={},
                                     errors={}, start_wall=1.0)


def test_approx_instant_energy_is_power_times_window_minus_power_read_time(machine, monkeypatch):
    # §1.1: instant power of every GPU is read first (before synchronizing), its reading time
    # measured; a GPU with exactly 0.0 J gets power_W x (time - power_query_time).
    mon = ZeusMonitor(gpu_indices=[0, 1], cpu_indices=[], approx_instant_energy=True)
    mon._m = _Native()
    order = []
    clock = iter([100.0, 200.0, 200.02, 300.0])  # begin; then the power read takes 0.02 s
    monkeypatch.setattr(energy_module, "time", lambda: next(clock))
    monkeypatch.setattr(mon.gpus, "get_instant_power_usage", lambda i: order.append(f"power{i}") or 250_000)
    monkeypatch.setattr(mon, "_sync", lambda: order.append("sync"))
    mon.begin_window("w", sync_execution=False)
    m = mon.end_window("w")
    assert order == ["power0", "power1", "sync"]
    assert m.gpu_energy[0] == 250.0 * (0.5 - (200.02 - 200.0))
    assert m.gpu_energy[1] == 7.0  # a counter that moved is kept


def test_window_time_is_monotonic_not_the_wall_clock(machine, monkeypatch):
    # Deliberate difference: Measurement.time comes from the monotonic clock; Zeus subtracts two
    # time.time() readings, which jump with the wall clock (NTP steps, manual changes).
    mon = ZeusMonitor(gpu_indices=[0], cpu_indices=[])
    clock = iter([1_000.0, 5_000.0, 5_000.0])  # the wall clock jumps by an hour during the window
    monkeypatch.setattr(energy_module, "time", lambda: next(clock))
    mon.begin_window("w", sync_execution=False)
    time.sleep(0.05)
    m = mon.end_window("w", sync_execution=False)
    assert 0.05 <= m.time < 1.0


def test_unknown_gpu_energy_is_nan_with_a_logged_warning(machine, monkeypatch, caplog):
    class Lost(_Native):
        def end_window(self, name, sync):
            return types.SimpleNamespace(time=0.5, gpu_energy={0: None, 1: 7.0}, cpu_energy={}, dram_energy={},
                                         errors={"gpu0": "GPU 0 is lost"}, start_wall=1.0)

    mon = ZeusMonitor(gpu_indices=[0, 1], cpu_indices=[])
    mon._m = Lost()
    mon.begin_window("w", sync_execution=False)
    with caplog.at_level(logging.WARNING, logger="zeus.monitor.energy"):
        m = mon.end_window("w", sync_execution=False)
    assert math.isnan(m.gpu_energy[0]) and m.gpu_energy[1] == 7.0
    assert [(r.name, r.levelno) for r in caplog.records] == [("zeus.monitor.energy", logging.WARNING)]
    assert "gpu0" in caplog.records[0].getMessage() and "GPU 0 is lost" in caplog.records[0].getMessage()


PRE_VOLTA = CAPTURE_LOGS + r"""
import time
from erg.compat.zeus.monitor import ZeusMonitor
from erg.compat.zeus.monitor.power import PowerMonitor
import erg.sim
m = erg.sim.current()
m.set_utilization(0, 1.0)
mon = ZeusMonitor(gpu_indices=[0], cpu_indices=[])
mon.begin_window("w", sync_execution=False)
time.sleep(0.5)
r = mon.end_window("w", sync_execution=False)
print(json.dumps({"pm": isinstance(mon.power_monitor, PowerMonitor), "pm_gpus": mon.power_monitor.gpu_indices,
                  "counter": mon.gpus.supports_get_total_energy_consumption(0), "energy": r.gpu_energy[0],
                  "time": r.time, "power": m.power(0)}))
"""


def test_gpus_without_a_counter_are_integrated_by_a_power_monitor():
    # §1.1: GPUs whose supports_get_total_energy_consumption is False (Pascal) go through a
    # PowerMonitor(gpu_indices=<those>, update_period=None).
    r = run_child(PRE_VOLTA, "1xP100")
    assert r["pm"] is True and r["pm_gpus"] == [0] and r["counter"] is False
    assert r["energy"] == pytest.approx(r["power"] * r["time"], rel=0.15)
