"""The package mirrors Zeus's module layout (issue 14, scope 1): ``from zeus.X import Y`` becomes
``from erg.compat.zeus.X import Y``; every module's ``__all__`` names what it defines, and no
typing helper leaks into it; the names ``erg.compat.zeus`` exposed before stay."""

import importlib
import typing

import pytest

# Zeus module → names a user program imports from it (reference/zeus.md §1.1-1.3, §1.8, §1.11).
LAYOUT = {
    "monitor": ["ZeusMonitor", "Measurement"],
    "monitor.energy": ["ZeusMonitor", "Measurement", "MeasurementState"],
    "monitor.power": ["PowerMonitor", "PowerDomain", "PowerSample", "infer_counter_update_period"],
    "monitor.temperature": ["TemperatureMonitor", "TemperatureSample"],
    "monitor.power_streaming": ["PowerStreamingClient", "PowerReadings", "CpuPowerReading"],
    "device": ["get_gpus", "get_cpus", "get_soc", "ZeusGPUInitError", "ZeusGPUNotSupportedError"],
    "device.gpu": ["get_gpus", "GPU", "GPUs", "EmptyGPUs", "ZeusGPUInitError", "ZeusGPUHeterogeneousError"],
    "device.gpu.common": ["GPU", "GPUs", "EmptyGPUs", "ZeusGPULostError"],
    "device.gpu.nvidia": ["NVIDIAGPU", "NVIDIAGPUs", "nvml_is_available"],
    "device.cpu": ["get_cpus", "CPU", "CPUs", "EmptyCPUs", "CpuDramMeasurement", "ZeusCPUInitError",
                   "ZeusCPUNoPermissionError", "ZeusCPUNotFoundError"],
    "device.cpu.common": ["CpuDramMeasurement", "CPU", "CPUs", "EmptyCPUs"],
    "device.cpu.rapl": ["RAPLCPU", "RAPLCPUs", "rapl_is_available", "ZeusRAPLNotSupportedError",
                        "ZeusRAPLFileInitError", "ZeusRAPLPermissionError"],
    "device.soc": ["get_soc", "SoC", "SoCMeasurement", "EmptySoC", "ZeusSoCInitError"],
    "device.soc.common": ["SoC", "SoCMeasurement", "EmptySoC", "ZeusSoCInitError"],
    "device.exception": ["ZeusBaseGPUError", "ZeusBaseCPUError", "ZeusBaseSoCError", "ZeusdError"],
    "device.common": ["has_sys_admin", "deprecated_alias", "DeprecatedAliasABCMeta"],
    "exception": ["ZeusBaseError"],
    "metric": ["Metric", "EnergyHistogram", "EnergyCumulativeCounter", "PowerGauge"],
    "callback": ["Callback", "CallbackSet"],
    "profile": ["TrialResult", "SweepResult", "SweepReport", "measure", "profile_measurement_duration",
                "profile_cooldown_duration", "profile_parameters"],
    "optimizer": [],
    "optimizer.power_limit": ["GlobalPowerLimitOptimizer", "HFGlobalPowerLimitOptimizer", "OptimumSelector",
                              "Energy", "Time", "ZeusCost", "MaxSlowdownConstraint", "Ready", "Warmup",
                              "Profiling", "Done", "PowerLimitMeasurement"],
    "optimizer.batch_size": [],
    "optimizer.batch_size.client": ["BatchSizeOptimizer"],
    "optimizer.batch_size.common": ["JobParams", "GpuConfig", "JobSpec", "JobSpecFromClient", "CreatedJob", "TrialId",
                                    "TrainingResult", "ReportResponse", "REGISTER_JOB_URL", "GET_NEXT_BATCH_SIZE_URL",
                                    "REPORT_RESULT_URL", "REPORT_END_URL", "DELETE_JOB_URL"],
    "optimizer.batch_size.exceptions": ["ZeusBSORuntimError", "ZeusBSOTrainFailError", "ZeusBSOConfigError",
                                        "ZeusBSOOperationOrderError", "ZeusBSOBadOperationError"],
    "utils": [],
    "utils.framework": ["sync_execution", "torch_is_available", "jax_is_available", "cupy_is_available",
                        "all_reduce", "is_distributed", "get_rank", "get_world_size"],
    "utils.metric": ["zeus_cost", "energy", "avg_power"],
    "utils.multiprocessing": ["warn_if_global_in_subprocess"],
    "utils.env": ["get_env"],
    "utils.lr_scaler": ["SquareRootScaler", "LinearScaler"],
    "utils.logging": ["get_logger", "FileAndConsole"],
    "utils.async_utils": ["create_task"],
    "utils.testing": ["ReplayZeusMonitor"],
    "utils.zeusd": ["ZeusdConfig", "ZeusdClient", "ZeusdError", "ZeusdConnectionError", "ZeusdAuthError",
                    "ZeusdCapabilityError", "require_capabilities"],
}
TYPING_HELPERS = set(typing.__all__) | {"annotations"}


@pytest.mark.parametrize("module", sorted(LAYOUT))
def test_module_exports(module):
    mod = importlib.import_module(f"erg.compat.zeus.{module}")
    for name in LAYOUT[module]:
        assert hasattr(mod, name), f"erg.compat.zeus.{module} lacks {name}"
        assert name in mod.__all__, f"{name} not in erg.compat.zeus.{module}.__all__"
    for name in mod.__all__:
        assert hasattr(mod, name), f"erg.compat.zeus.{module}.__all__ names a missing {name}"
        assert name not in TYPING_HELPERS, f"typing helper {name} in erg.compat.zeus.{module}.__all__"
    star = {}
    exec(f"from erg.compat.zeus.{module} import *", star)  # what `import *` gives: __all__ only
    assert set(star) - {"__builtins__"} == set(mod.__all__)


def test_earlier_names_stay():
    import erg.compat.zeus as z

    for name in ("ZeusMonitor", "Measurement", "PowerMonitor", "PowerDomain", "PowerSample"):
        assert getattr(z, name) is getattr(importlib.import_module(
            "erg.compat.zeus.monitor.power" if name.startswith("Power") else "erg.compat.zeus.monitor.energy"), name)
    assert z.__version__ == "0.16.0"
