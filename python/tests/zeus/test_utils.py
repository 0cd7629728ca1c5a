"""erg.compat.zeus.utils (and callback, exception) against reference/zeus.md §1.11 and §9 (12):
framework sync and its RuntimeErrors, the cost metric and power-log readers, get_env, the
learning-rate scalers, the spawned-child warning, ReplayZeusMonitor, logging and async helpers."""

import asyncio
import importlib.util
import json
import logging
import socket
import subprocess
import sys
import warnings

import pytest
from conftest import child_env
from zeus_helpers import EMPTY, params

import erg
from erg.compat.zeus import callback, exception
from erg.compat.zeus.monitor.energy import ZeusMonitor
from erg.compat.zeus.utils import async_utils, env, framework, lr_scaler, metric, multiprocessing, testing
from erg.compat.zeus.utils import logging as zlogging


# Short windows measure 0 J and warn (through `warnings`, as Zeus); pinned in test_zeus_compat.py.
pytestmark = pytest.mark.filterwarnings("ignore:The energy consumption of one or more GPUs")


def test_public_names_and_signatures():
    assert framework.__all__ == [
        "torch_is_available", "jax_is_available", "cupy_is_available", "sync_execution", "all_reduce",
        "is_distributed", "get_rank", "get_world_size",
    ]
    assert params(framework.sync_execution) == [("gpu_devices", EMPTY), ("sync_with", "torch")]
    assert params(framework.torch_is_available) == [("ensure_available", False), ("ensure_cuda", True)]
    assert params(framework.jax_is_available) == [("ensure_available", False), ("ensure_cuda", True)]
    assert params(framework.cupy_is_available) == [("ensure_available", False)]
    assert params(framework.all_reduce) == [("object", EMPTY), ("operation", EMPTY)]
    assert metric.__all__ == ["zeus_cost", "energy", "avg_power"]
    assert params(metric.zeus_cost) == [("energy", EMPTY), ("time", EMPTY), ("eta_knob", EMPTY), ("max_power", EMPTY)]
    assert params(metric.energy) == [("logfile", EMPTY), ("start", None), ("end", None)]
    assert params(metric.avg_power) == [("logfile", EMPTY), ("start", None), ("end", None)]
    assert params(env.get_env) == [("name", EMPTY), ("valtype", EMPTY), ("default", None)]
    assert params(multiprocessing.warn_if_global_in_subprocess) == [("obj", EMPTY)]
    assert params(testing.ReplayZeusMonitor.__init__) == [
        ("gpu_indices", None), ("approx_instant_energy", False), ("log_file", None), ("ignore_sync_execution", False),
        ("match_window_name", True),
    ]
    assert params(async_utils.create_task) == [("coroutine", EMPTY), ("logger", None)]
    assert params(zlogging.get_logger) == [("name", EMPTY), ("level", logging.INFO), ("propagate", False)]
    assert issubclass(exception.ZeusBaseError, Exception)
    assert str(exception.ZeusBaseError("boom")) == "boom" and exception.ZeusBaseError("boom").message == "boom"


@pytest.mark.skipif(importlib.util.find_spec("jax") is not None or importlib.util.find_spec("cupy") is not None,
                    reason="needs JAX and CuPy not installed")
def test_sync_execution_runtime_errors(machine):
    for sync_with, message in (("jax", "Failed to import JAX"), ("cupy", "Failed to import CuPy"),
                               ("tensorflow", "No framework is available.")):
        with pytest.raises(RuntimeError, match=f"^{message}$") as e:
            framework.sync_execution([0], sync_with=sync_with)
        assert isinstance(e.value, erg.UnavailableError)
    assert framework.jax_is_available() is False and framework.cupy_is_available() is False


def test_sync_execution_with_torch(machine, monkeypatch):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        framework.sync_execution([0])
        return
    framework.sync_execution([0])  # simulated GPUs, PyTorch without CUDA: nothing to wait for
    monkeypatch.setattr(framework, "_no_cuda_on_simulated_machine", lambda _f: False)  # as on hardware
    with pytest.raises(RuntimeError, match=r"^PyTorch is available but does not have CUDA support\.$"):
        framework.sync_execution([0])
    assert framework.torch_is_available(ensure_cuda=False) is True
    assert framework.is_distributed() is False and framework.get_rank() == 0 and framework.get_world_size() == 1
    assert framework.all_reduce([1.0, 2.0], "sum") == [1.0, 2.0]  # not distributed: as is


def test_zeus_cost():
    assert metric.zeus_cost(100.0, 10.0, 0.5, 300) == 0.5 * 100.0 + 0.5 * 300 * 10.0
    assert metric.zeus_cost(100.0, 10.0, 1.0, 300) == 100.0


def test_power_log_readers(tmp_path):
    log = tmp_path / "power.csv"
    log.write_text(
        "Time,Power\n"
        "2024-01-01 00:00:00.000000,100000\n"
        "2024-01-01 00:00:01.000000,200000\n"
        "2024-01-01 00:00:02.000000,200000\n"
        "2024-01-01 00:00:03.0"  # the last line is skipped (skipfooter=1), as Zeus
    )
    assert metric.energy(log) == pytest.approx(150.0 + 200.0)  # trapezoid, W x s
    assert metric.energy(log, start=1.0) == pytest.approx(200.0)
    assert metric.energy(log, end=1.0) == pytest.approx(150.0)
    assert metric.energy(log, start=-1.0) == pytest.approx(200.0)  # counted back from the last sample
    assert metric.avg_power(log) == pytest.approx(350.0 / 2)
    with pytest.raises(ValueError, match="At least 2 points"):
        metric.energy(log, start=1.5, end=1.9)


def test_get_env(monkeypatch):
    monkeypatch.setenv("ERG_T_INT", "42")
    monkeypatch.setenv("ERG_T_BOOL", "True")
    monkeypatch.setenv("ERG_T_BAD", "yes")
    assert env.get_env("ERG_T_INT", int) == 42
    assert env.get_env("ERG_T_BOOL", bool) is True
    assert env.get_env("ERG_T_MISSING", int, default=7) == 7
    with pytest.raises(ValueError, match="^Strange boolean environment variable value 'yes'$"):
        env.get_env("ERG_T_BAD", bool)
    with pytest.raises(ValueError, match="^Missing environment variable 'ERG_T_MISSING'$"):
        env.get_env("ERG_T_MISSING", int)


def test_lr_scalers():
    assert lr_scaler.SquareRootScaler(bs=32, lr=0.1).compute_lr(128) == pytest.approx(0.2)
    assert lr_scaler.LinearScaler(bs=32, lr=0.1).compute_lr(128) == pytest.approx(0.4)


def test_warn_if_global_in_subprocess(monkeypatch):
    monkeypatch.setattr(multiprocessing, "_is_spawned_child", lambda: False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        multiprocessing.warn_if_global_in_subprocess("ZeusMonitor")
    assert caught == []  # not a spawned child: silent
    monkeypatch.setattr(multiprocessing, "_is_spawned_child", lambda: True)
    with pytest.warns(UserWarning, match="^ZeusMonitor was instantiated during module import in a spawned"):
        multiprocessing.warn_if_global_in_subprocess(ZeusMonitor.__new__(ZeusMonitor))


def test_replay_zeus_monitor(machine, tmp_path):
    log = tmp_path / "zeus.csv"
    mon = ZeusMonitor(gpu_indices=[0, 2], cpu_indices=[], log_file=log)
    recorded = []
    for name in ("a", "b"):
        mon.begin_window(name, sync_execution=False)
        recorded.append(mon.end_window(name, sync_execution=False))
    mon.log_file.close()
    replay = testing.ReplayZeusMonitor(log_file=log)
    assert isinstance(replay, ZeusMonitor) and replay.gpu_indices == [0, 2]  # from the header
    replay.begin_window("a")
    with pytest.raises(RuntimeError, match="^Window a is already ongoing.$"):
        replay.begin_window("a")
    m = replay.end_window("a")
    assert m.time == recorded[0].time and m.gpu_energy == recorded[0].gpu_energy
    with pytest.raises(RuntimeError, match="^Window a is not ongoing.$"):
        replay.end_window("a")
    replay.begin_window("x")
    with pytest.raises(RuntimeError, match="^Was expecting b, not x.$"):
        replay.end_window("x")
    replay.begin_window("c")
    with pytest.raises(RuntimeError, match="^No more lines in the log file.$"):
        replay.end_window("c")
    with pytest.raises(ValueError):
        testing.ReplayZeusMonitor(log_file=None)


def test_get_logger_and_file_and_console(tmp_path, capsys):
    logger = zlogging.get_logger("erg.test.zeus_get_logger")
    assert logger.propagate is False and logger.level == logging.INFO and len(logger.handlers) == 1
    logger.info("hello")
    out = capsys.readouterr().out
    assert "[erg.test.zeus_get_logger]" in out and out.endswith("hello\n")
    assert zlogging.get_logger("erg.test.zeus_get_logger") is logger and len(logger.handlers) == 1
    tee = zlogging.FileAndConsole(tmp_path / "tee.txt")
    tee.write("both\n")
    assert capsys.readouterr().out == "both\n" and (tmp_path / "tee.txt").read_text() == "both\n"


def test_create_task_logs_the_exception(caplog):
    async def boom():
        raise KeyError("lost")

    async def main():
        task = async_utils.create_task(boom(), logging.getLogger("erg.test.async"))
        await asyncio.sleep(0.01)
        return task

    with caplog.at_level(logging.ERROR, logger="erg.test.async"):
        task = asyncio.run(main())
    assert task.done() and isinstance(task.exception(), KeyError)
    assert [r.name for r in caplog.records] == ["erg.test.async"] and "Exception raised by task" in caplog.text


def test_callback_set():
    calls = []

    class Recorder(callback.Callback):
        def on_step_end(self):
            calls.append("step")

        def on_evaluate(self, metric):
            calls.append(metric)

    both = callback.CallbackSet([Recorder(), Recorder()])
    both.on_step_end()
    both.on_evaluate(0.5)
    both.on_train_begin()  # the base class's hooks do nothing
    assert calls == ["step", "step", 0.5, 0.5]


RANK = r"""
import json, torch.distributed as dist
from erg.compat.zeus.utils import framework
dist.init_process_group("gloo", init_method="env://")
out = {"rank": framework.get_rank(), "world": framework.get_world_size(), "dist": framework.is_distributed(),
       "sum": framework.all_reduce([dist.get_rank() + 1.0, 10.0], "sum"),
       "max": framework.all_reduce([dist.get_rank() + 1.0], "max")}
try:
    framework.all_reduce([1.0], "min")
except ValueError as e:
    out["error"] = str(e)
dist.destroy_process_group()
print(json.dumps(out))
"""


def test_all_reduce_over_two_ranks_on_cpu(machine):
    # torch.distributed with gloo and PyTorch without CUDA: all_reduce reduces CPU tensors (Zeus
    # moves the tensor to CUDA first, which fails there).
    pytest.importorskip("torch.distributed")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = [subprocess.Popen([sys.executable, "-c", RANK], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=child_env(MASTER_ADDR="127.0.0.1", MASTER_PORT=port, RANK=r, WORLD_SIZE=2))
             for r in (0, 1)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1] for o in outs]
    results = sorted((json.loads(o[0].strip().splitlines()[-1]) for o in outs), key=lambda r: r["rank"])
    assert [r["rank"] for r in results] == [0, 1]
    for r in results:
        assert r["world"] == 2 and r["dist"] is True
        assert r["sum"] == [3.0, 20.0] and r["max"] == [2.0]
        assert r["error"] == "all_reduce unsupported operation: min"
