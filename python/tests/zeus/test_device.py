"""erg.compat.zeus.device against reference/zeus.md §1.8: get_gpus/get_cpus/get_soc, the GPU
and CPU method names, signatures, units (mW, mJ, MHz, °C as ints) and exceptions, each also an
erg error."""

import inspect
import time
import warnings

import pytest
from zeus_helpers import EMPTY, params

import erg
import erg.compat.zeus.device as device
import erg.compat.zeus.device.cpu as cpu_pkg
import erg.compat.zeus.device.gpu as gpu_pkg
from erg.compat.zeus.device import get_cpus, get_gpus, get_soc
from erg.compat.zeus.device.cpu.common import CPUs, CpuDramMeasurement, EmptyCPUs
from erg.compat.zeus.device.exception import ZeusBaseCPUError, ZeusBaseGPUError, ZeusBaseSoCError, ZeusdError
from erg.compat.zeus.device.gpu import common as gpu_common
from erg.compat.zeus.device.gpu.common import GPU, GPUs, EmptyGPUs
from erg.compat.zeus.device.gpu.nvidia import NVIDIAGPU
from erg.compat.zeus.device.soc.common import EmptySoC, SoC, ZeusSoCInitError
from erg.compat.zeus.exception import ZeusBaseError

GPU_ERRORS = [
    "ZeusGPUInitError", "ZeusGPUInvalidArgError", "ZeusGPUNotSupportedError", "ZeusGPUNoPermissionError",
    "ZeusGPUAlreadyInitializedError", "ZeusGPUNotFoundError", "ZeusGPUInsufficientSizeError",
    "ZeusGPUInsufficientPowerError", "ZeusGPUDriverNotLoadedError", "ZeusGPUTimeoutError", "ZeusGPUIRQError",
    "ZeusGPULibraryNotFoundError", "ZeusGPUFunctionNotFoundError", "ZeusGPUCorruptedInfoROMError",
    "ZeusGPULostError", "ZeusGPUResetRequiredError", "ZeusGPUOperatingSystemError",
    "ZeusGPULibRMVersionMismatchError", "ZeusGPUMemoryError", "ZeusGPUUnknownError", "ZeusGPUHeterogeneousError",
]

# §1.8's GPU table: method → parameters after self (GPUs: the same after a leading gpu_index).
GPU_METHODS = {
    "get_name": [],
    "get_power_management_limit_constraints": [],
    "get_power_management_limit": [],
    "set_power_management_limit": [("power_limit_mw", EMPTY), ("block", True)],
    "reset_power_management_limit": [("block", True)],
    "set_persistence_mode": [("enabled", EMPTY), ("block", True)],
    "get_persistence_mode": [],
    "get_supported_memory_clocks": [],
    "set_memory_locked_clocks": [("min_clock_mhz", EMPTY), ("max_clock_mhz", EMPTY), ("block", True)],
    "reset_memory_locked_clocks": [("block", True)],
    "get_supported_graphics_clocks": [("memory_clock_mhz", None)],
    "set_gpu_locked_clocks": [("min_clock_mhz", EMPTY), ("max_clock_mhz", EMPTY), ("block", True)],
    "reset_gpu_locked_clocks": [("block", True)],
    "reset_locked_clocks": [("block", True)],
    "get_average_power_usage": [],
    "get_instant_power_usage": [],
    "get_average_memory_power_usage": [],
    "supports_get_total_energy_consumption": [],
    "get_total_energy_consumption": [],
    "get_gpu_temperature": [],
}


def test_public_names():
    assert device.__all__[:3] == ["get_gpus", "get_cpus", "get_soc"]
    for name in GPU_ERRORS:
        for module in (device, gpu_pkg, gpu_common):
            cls = getattr(module, name)
            assert issubclass(cls, ZeusBaseGPUError) and issubclass(cls, ZeusBaseError)
        assert name in device.__all__ and name in gpu_pkg.__all__
    for name in ("ZeusCPUInitError", "ZeusCPUNoPermissionError", "ZeusCPUNotFoundError"):
        assert issubclass(getattr(cpu_pkg, name), ZeusBaseCPUError)
    assert issubclass(ZeusSoCInitError, ZeusBaseSoCError) and issubclass(ZeusdError, ZeusBaseGPUError)
    assert params(get_gpus) == [("ensure_homogeneous", False)]
    assert params(get_cpus) == [] and params(get_soc) == []


def test_gpu_method_signatures():
    for name, expected in GPU_METHODS.items():
        assert params(getattr(GPU, name)) == expected, name
        assert params(getattr(GPUs, name)) == [("gpu_index", EMPTY), *expected], name
        assert params(getattr(EmptyGPUs, name)) == [("gpu_index", EMPTY), *expected], name
    assert isinstance(inspect.getattr_static(GPU, "supports_nonblocking_setters"), property)


def test_gpus_over_erg(machine):
    gpus = get_gpus()
    assert gpus is get_gpus() and isinstance(gpus, GPUs) and len(gpus) == 4 == len(gpus.gpus)
    assert get_gpus(ensure_homogeneous=True) is gpus  # four A100s
    assert gpus.get_name(0) == "NVIDIA A100-SXM4-80GB"
    lo, hi = gpus.get_power_management_limit_constraints(0)
    assert type(lo) is int and type(hi) is int and 0 < lo < hi  # mW
    assert (lo, hi) == (100_000, 400_000)  # the A100-SXM4's 100-400 W, in mW
    machine.set_utilization(0, 0.8)
    try:
        time.sleep(0.25)
        p = gpus.get_instant_power_usage(0)
        assert type(p) is int and p == pytest.approx(machine.mean_power(0) * 1000, rel=0.1)  # mW (the load's mean, not one 1 ms step)
        e0 = gpus.get_total_energy_consumption(0)
        time.sleep(0.3)
        e1 = gpus.get_total_energy_consumption(0)
        assert type(e0) is int and e1 - e0 == pytest.approx(machine.mean_power(0) * 300, rel=0.4)  # mJ
    finally:
        machine.set_utilization(0, 0.0)
    assert gpus.supports_get_total_energy_consumption(0) is True
    assert type(gpus.get_gpu_temperature(0)) is int
    mem = gpus.get_supported_memory_clocks(0)
    assert mem and all(type(c) is int for c in mem)
    graphics = gpus.get_supported_graphics_clocks(0, mem[0])
    assert graphics and all(type(c) is int for c in graphics)
    assert gpus.get_supported_graphics_clocks(0) == gpus.get_supported_graphics_clocks(0, max(mem))
    assert gpus.gpus[0].supports_nonblocking_setters is False


def test_power_limit_calls(machine):
    gpus = get_gpus()
    lo, hi = gpus.get_power_management_limit_constraints(3)
    try:
        gpus.set_power_management_limit(3, lo + 50_000)
        assert gpus.get_power_management_limit(3) == lo + 50_000
        gpus.set_power_management_limit(3, lo + 50_000, block=False)  # unchanged: no driver call, no error
        gpus.reset_power_management_limit(3)
        assert gpus.get_power_management_limit(3) == hi  # the A100's default is its maximum
        with pytest.raises(gpu_common.ZeusGPUInvalidArgError) as e:
            gpus.set_power_management_limit(3, hi + 1_000_000)
        assert isinstance(e.value, erg.InvalidArgumentError) and isinstance(e.value, ValueError)
        gpus.set_persistence_mode(3, True)
        assert gpus.get_persistence_mode(3) is True
        gpus.set_persistence_mode(3, False)
        mem = max(gpus.get_supported_memory_clocks(3))
        graphics = gpus.get_supported_graphics_clocks(3, mem)
        gpus.set_gpu_locked_clocks(3, min(graphics), max(graphics))
        gpus.reset_locked_clocks(3)
    finally:
        gpus.reset_power_management_limit(3)


def test_device_errors_are_zeus_and_erg_errors(machine):
    gpus = get_gpus()
    with pytest.raises(gpu_common.ZeusGPUNotSupportedError) as e:
        gpus.get_average_power_usage(0)  # the A100 has no average power field
    assert isinstance(e.value, erg.NotSupportedError) and e.value.code == "not_supported"
    assert isinstance(e.value, ZeusBaseError) and str(e.value)
    with pytest.raises(IndexError) as e:
        gpus.get_name(4)
    assert isinstance(e.value, erg.InvalidArgumentError)


def test_sys_admin_warning_is_a_warning_once(machine, monkeypatch):
    monkeypatch.setattr(gpu_common, "has_sys_admin", lambda: False)
    gpu = NVIDIAGPU(2)
    lo, _ = gpu.get_power_management_limit_constraints()
    try:
        with pytest.warns(UserWarning, match="requires `SYS_ADMIN` privileges") as w:
            gpu.set_power_management_limit(lo)
            gpu.set_power_management_limit(lo)
        assert len(w) == 1
    finally:
        gpu.reset_power_management_limit()


def test_camel_case_aliases_warn_once(machine):
    gpus = get_gpus()
    with pytest.warns(DeprecationWarning, match="'getName' is deprecated") as w:
        assert gpus.getName(1) == gpus.get_name(1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gpus.getName(1)  # once only
    assert len(w) == 1
    with pytest.warns(DeprecationWarning, match="Use 'get_total_energy_consumption' instead"):
        assert gpus.getTotalEnergyConsumption(1) > 0


def test_empty_gpus():
    empty = EmptyGPUs()
    assert len(empty) == 0 and list(empty.gpus) == []
    for name in GPU_METHODS:
        with pytest.raises(ValueError, match=r"^No GPUs available\.$"):
            getattr(empty, name)(0)


def test_cpus_over_erg(machine):
    cpus = get_cpus()
    assert cpus is get_cpus() and isinstance(cpus, CPUs) and len(cpus) == 2
    assert params(CPUs.get_total_energy_consumption) == [("index", EMPTY)]
    assert params(CPUs.supports_get_dram_energy_consumption) == [("index", EMPTY)]
    a = cpus.get_total_energy_consumption(0)
    time.sleep(0.1)
    b = cpus.get_total_energy_consumption(0)
    assert isinstance(a, CpuDramMeasurement) and b.cpu_mj > a.cpu_mj  # mJ, cumulative
    assert cpus.supports_get_dram_energy_consumption(0) is (a.dram_mj is not None)
    with pytest.raises(IndexError) as e:
        cpus.get_total_energy_consumption(2)
    assert isinstance(e.value, erg.InvalidArgumentError)
    d = b - a
    assert d.cpu_mj == b.cpu_mj - a.cpu_mj
    assert (d / 2).cpu_mj == d.cpu_mj / 2
    with pytest.raises(ZeroDivisionError):
        d / 0
    assert CpuDramMeasurement(cpu_mj=1.0).dram_mj is None
    empty = EmptyCPUs()
    assert len(empty) == 0
    with pytest.raises(ValueError, match=r"^No CPUs available\.$"):
        empty.get_total_energy_consumption(0)


def test_no_soc():
    # erg measures no SoC yet (Apple silicon, Jetson): get_soc raises as Zeus does elsewhere.
    with pytest.raises(ZeusSoCInitError, match=r"^No observable SoC was found on the current machine\.$"):
        get_soc()
    soc = EmptySoC()
    assert isinstance(soc, SoC) and soc.get_available_metrics() == set()
    for call in (soc.get_total_energy_consumption, lambda: soc.begin_window("w"), lambda: soc.end_window("w")):
        with pytest.raises(ValueError, match=r"^No SoC is available\.$"):
            call()
    assert params(SoC.begin_window) == [("key", EMPTY), ("restart", False)]
    assert params(SoC.end_window) == [("key", EMPTY)]
