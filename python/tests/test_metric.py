"""Push to a Prometheus Pushgateway from Python (issue 16): erg.metric and Zeus's names in
erg.compat.zeus.metric, against Debian's prometheus-pushgateway started on loopback (a missing
binary is a failure naming the package, never a skip). What the gateway holds is read back from
its /metrics: names, types, HELP texts, labels, Zeus's default buckets."""

import logging
import math
import re
import socket
import subprocess
import sys
import time
import types
import urllib.request
import warnings

import pytest

import erg
import erg.metric
from erg.compat.zeus import metric as zmetric

GATEWAY = "/usr/bin/prometheus-pushgateway"
LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def gateway():
    import os

    assert os.path.exists(GATEWAY), f"{GATEWAY} is missing: install Debian's prometheus-pushgateway (./dev deps)"
    port = free_port()
    proc = subprocess.Popen([GATEWAY, f"--web.listen-address=127.0.0.1:{port}"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                with urllib.request.urlopen(url + "/-/ready", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline and proc.poll() is None, "the Pushgateway did not start"
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


class Exposition:
    """The gateway's /metrics: samples as (name, labels) -> value, and TYPE/HELP lines."""

    def __init__(self, url: str) -> None:
        with urllib.request.urlopen(url + "/metrics", timeout=5) as r:
            text = r.read().decode()
        self.types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
        self.help = dict(re.findall(r"^# HELP (\S+) (.*)$", text, re.M))
        self.samples = []
        for line in text.splitlines():
            m = LINE.match(line)
            if m:
                self.samples.append((m[1], dict(LABEL.findall(m[2] or "")), float(m[3])))

    def find(self, name: str, **labels: str):
        return [(lab, v) for n, lab, v in self.samples
                if n == name and all(lab.get(k) == str(want) for k, want in labels.items())]

    def value(self, name: str, **labels: str) -> float:
        found = self.find(name, **labels)
        assert len(found) == 1, (name, labels, found)
        return found[0][1]

    def les(self, name: str, **labels: str):
        return sorted(float(lab["le"]) for lab, _ in self.find(name + "_bucket", **labels))


def test_histogram_pushes_zeus_names_types_and_default_buckets(gateway, machine):
    machine.set_utilization(0, 0.8)
    with erg.metric.EnergyHistogram(gateway, "py_hist", gpu_indices=[0, 1], cpu_indices=[0]) as h:
        for _ in range(2):
            h.begin_window("epoch")
            time.sleep(0.3)
            h.end_window("epoch")
        assert h.flush(5.0)
        assert h.push_errors == 0
    e = Exposition(gateway)
    sel = {"job": "py_hist", "window": "epoch"}
    assert "rank" not in e.find("energy_monitor_gpu_energy_joules_count", **sel)[0][0]  # not distributed
    for dev, buckets in (("gpu", erg.metric.DEFAULT_GPU_BUCKETS), ("cpu", erg.metric.DEFAULT_CPU_BUCKETS),
                         ("dram", erg.metric.DEFAULT_DRAM_BUCKETS)):
        name = f"energy_monitor_{dev}_energy_joules"
        assert e.types[name] == "histogram"
        assert e.help[name] == f"{dev.upper()} energy consumption"
        assert e.value(name + "_count", index="0", **sel) == 2
        assert e.les(name, index="0", **sel) == [*buckets, math.inf]
    assert erg.metric.DEFAULT_GPU_BUCKETS == [50.0, 100.0, 200.0, 500.0, 1000.0]  # Zeus's defaults
    assert erg.metric.DEFAULT_CPU_BUCKETS == [10.0, 50.0, 100.0, 500.0, 1000.0]
    assert erg.metric.DEFAULT_DRAM_BUCKETS == [5.0, 10.0, 20.0, 50.0, 150.0]
    assert e.value("energy_monitor_gpu_energy_joules_count", index="1", **sel) == 2
    assert not e.find("energy_monitor_gpu_energy_joules_count", index="2", **sel)  # not asked for
    # Two 0.3 s windows of a simulated A100 at 80 % utilisation: some tens to a few hundred J.
    assert 2 * 0.3 * 50 < e.value("energy_monitor_gpu_energy_joules_sum", index="0", **sel) < 2 * 0.3 * 450


def test_counter_gauge_and_histogram_share_a_job_and_end_window_is_prompt(gateway):
    counter = erg.metric.EnergyCumulativeCounter(gateway, "py_all", update_period=10.0)
    gauge = erg.metric.PowerGauge(gateway, "py_all", update_period=10.0, gpu_indices=[0])
    hist = erg.metric.EnergyHistogram(gateway, "py_all", cpu_indices=[])
    counter.begin_window("epoch")
    counter.begin_window("step")
    with pytest.raises(erg.AlreadyExistsError):
        counter.begin_window("step")
    gauge.begin_window("epoch")
    hist.begin_window("epoch")
    time.sleep(0.4)
    hist.end_window("epoch")
    t = time.monotonic()
    counter.end_window("step")  # a 10 s period: returns at once, the final value still goes out
    gauge.end_window("epoch")
    assert time.monotonic() - t < 0.3
    time.sleep(0.2)
    counter.end_window("epoch")
    with pytest.raises(erg.NotFoundError):
        counter.end_window("epoch")
    for m in (counter, gauge, hist):
        assert m.flush(5.0)
        assert m.push_errors == 0
        m.close()
    e = Exposition(gateway)
    sel = {"job": "py_all"}
    assert e.types["energy_monitor_gpu_energy_joules_total"] == "counter"
    step = e.value("energy_monitor_gpu_energy_joules_total", window="step", index="3", **sel)
    epoch = e.value("energy_monitor_gpu_energy_joules_total", window="epoch", index="3", **sel)
    assert 0 < step < epoch  # the epoch window ran longer
    assert e.value("energy_monitor_cpu_energy_joules_total", window="step", index="1", **sel) > 0
    assert e.value("energy_monitor_dram_energy_joules_total", window="epoch", index="0", **sel) > 0
    assert e.types["power_monitor_gpu_power_watts"] == "gauge"
    assert e.help["power_monitor_gpu_power_watts"] == "Records power consumption for GPU over time"
    assert e.value("power_monitor_gpu_power_watts", window="epoch", index="0", **sel) > 20
    assert e.value("energy_monitor_gpu_energy_joules_count", window="epoch", index="0", **sel) == 1
    assert not e.find("energy_monitor_cpu_energy_joules_count", **sel)  # cpu_indices=[]


def test_the_torch_distributed_rank_is_a_grouping_label(gateway, monkeypatch):
    # A stand-in for an initialized process group (torch itself is not needed to check the lookup).
    dist = types.ModuleType("torch.distributed")
    dist.is_available = lambda: True
    dist.is_initialized = lambda: True
    dist.get_rank = lambda: 3
    monkeypatch.setitem(sys.modules, "torch.distributed", dist)
    assert erg.metric.distributed_rank() == 3
    with erg.metric.EnergyHistogram(gateway, "py_rank", gpu_indices=[0], cpu_indices=[]) as h:
        h.begin_window("w")
        h.end_window("w")
        assert h.flush(5.0)
    with erg.metric.EnergyHistogram(gateway, "py_rank", gpu_indices=[0], cpu_indices=[], rank=None,
                                    grouping={"host": "a"}) as h:
        h.begin_window("w")
        h.end_window("w")
        assert h.flush(5.0)
    dist.is_initialized = lambda: False
    assert erg.metric.distributed_rank() is None
    e = Exposition(gateway)
    ranks = sorted(lab.get("rank", "") for lab, _ in e.find("energy_monitor_gpu_energy_joules_count", job="py_rank"))
    assert ranks == ["", "3"]
    assert e.find("energy_monitor_gpu_energy_joules_count", job="py_rank", host="a")


def test_a_gateway_that_never_answers_is_logged_and_never_holds_up_the_program(caplog):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)  # the kernel accepts; nobody reads or answers
    url = "127.0.0.1:%d" % listener.getsockname()[1]
    try:
        t0 = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="erg.metric"):
            h = erg.metric.EnergyHistogram(url, "stuck", cpu_indices=[], timeout=0.3, max_attempts=2,
                                           retry_backoff=0.05, close_timeout=1.0, gpu_buckets=[0.0, 1e9])
            for _ in range(3):
                h.begin_window("w")
                t = time.monotonic()
                h.end_window("w")
                assert time.monotonic() - t < 0.2
            assert h.flush(3.0)
            assert h.push_errors >= 2
            h.close()
        assert time.monotonic() - t0 < 6
        assert any("Pushgateway" in r.getMessage() and r.name == "erg.metric" for r in caplog.records)
    finally:
        listener.close()


def test_bad_arguments_are_erg_errors():
    with pytest.raises(erg.InvalidArgumentError, match="https"):
        erg.metric.EnergyHistogram("https://gw:9091", "j")
    with pytest.raises(erg.InvalidArgumentError, match="GPU index 9"):
        erg.metric.PowerGauge("gw:9091", "j", 1.0, gpu_indices=[9])
    with pytest.raises(erg.InvalidArgumentError, match="bucket"):
        erg.metric.EnergyHistogram("gw:9091", "j", cpu_buckets=[])


# ---- Zeus's names: erg.compat.zeus.metric -----------------------------------------------------


def test_zeus_signatures_names_and_errors(gateway):
    import inspect

    assert list(inspect.signature(zmetric.EnergyHistogram).parameters) == [
        "cpu_indices", "gpu_indices", "pushgateway_url", "job", "gpu_bucket_range", "cpu_bucket_range",
        "dram_bucket_range"]
    assert list(inspect.signature(zmetric.EnergyCumulativeCounter).parameters) == [
        "cpu_indices", "gpu_indices", "update_period", "pushgateway_url", "job"]
    assert list(inspect.signature(zmetric.PowerGauge).parameters) == [
        "gpu_indices", "update_period", "pushgateway_url", "job"]
    assert issubclass(zmetric.EnergyHistogram, zmetric.Metric)
    with pytest.raises(ValueError, match="GPU bucket range cannot be empty"):
        zmetric.EnergyHistogram([0], [0], gateway, "z", gpu_bucket_range=[])

    h = zmetric.EnergyHistogram(cpu_indices=[0], gpu_indices=[0], pushgateway_url=gateway, job="zeus_job",
                                gpu_bucket_range=[1e6, 2e6])
    h.begin_window("step")
    with pytest.warns(UserWarning, match="outside the buckets"):  # Zeus warns below the smallest bucket
        h.end_window("step")
    assert h.flush(5.0)
    c = zmetric.EnergyCumulativeCounter([0], [0], 10, gateway, "zeus_job")
    c.begin_window("step")
    t = time.monotonic()
    c.end_window("step")
    assert time.monotonic() - t < 0.3  # Zeus joins its process for up to 20 s
    with pytest.raises(ValueError):  # Zeus: "No active monitoring process found"
        c.end_window("step")
    g = zmetric.PowerGauge([0], 10, gateway, "zeus_job")
    g.begin_window("step")
    with pytest.raises(ValueError):  # Zeus: "PowerGauge metric 'step' already exists."
        g.begin_window("step")
    g.end_window("step")
    with pytest.raises(KeyError):  # Zeus: the dict lookup's KeyError
        g.end_window("step")
    for m in (c, g):
        assert m.flush(5.0)
    e = Exposition(gateway)
    sel = {"job": "zeus_job", "window": "step", "index": "0"}
    assert e.les("energy_monitor_gpu_energy_joules", **sel) == [1e6, 2e6, math.inf]
    assert e.les("energy_monitor_cpu_energy_joules", **sel) == [10.0, 50.0, 100.0, 500.0, 1000.0, math.inf]
    assert e.value("energy_monitor_gpu_energy_joules_total", **sel) > 0
    assert e.value("power_monitor_gpu_power_watts", **sel) > 0
    assert e.types["energy_monitor_gpu_energy_joules"] == "histogram"


def test_zeus_push_failures_are_logged_not_raised(caplog):
    # Zeus's EnergyHistogram raises from end_window when the push fails; erg logs it (zeus.metric).
    port = free_port()  # nothing listens
    with caplog.at_level(logging.WARNING, logger="zeus.metric"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        h = zmetric.EnergyHistogram([], [0], f"http://127.0.0.1:{port}", "gone")
        h.begin_window("w")
        h.end_window("w")
        assert h.flush(10.0)
        assert h.push_errors >= 1
        h.close()
    assert any(r.name == "zeus.metric" and "Pushgateway" in r.getMessage() for r in caplog.records)


def test_difference_zeus_metrics_run_in_threads_with_every_gpu_and_the_rank(gateway, monkeypatch):
    # erg: threads, not spawned processes; gpu_indices=None is every GPU (Zeus: no GPU series and
    # an AttributeError at end_window); a duplicate counter window is an error (Zeus: a second
    # process); the torch.distributed rank joins the grouping key (Zeus: {job} only).
    import multiprocessing

    dist = types.ModuleType("torch.distributed")
    dist.is_available = lambda: True
    dist.is_initialized = lambda: True
    dist.get_rank = lambda: 1
    monkeypatch.setitem(sys.modules, "torch.distributed", dist)
    h = zmetric.EnergyHistogram([], None, gateway, "zeus_diff")
    c = zmetric.EnergyCumulativeCounter([], [0], 10, gateway, "zeus_diff")
    h.begin_window("w")
    c.begin_window("w")
    with pytest.raises(ValueError):
        c.begin_window("w")
    assert multiprocessing.active_children() == []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a short window is below Zeus's smallest GPU bucket
        h.end_window("w")
    c.end_window("w")
    assert h.flush(5.0) and c.flush(5.0)
    e = Exposition(gateway)
    idx = sorted(lab["index"] for lab, _ in e.find("energy_monitor_gpu_energy_joules_count", job="zeus_diff"))
    assert idx == ["0", "1", "2", "3"]
    assert e.find("energy_monitor_gpu_energy_joules_count", job="zeus_diff", rank="1", window="w")
    assert e.find("energy_monitor_gpu_energy_joules_total", job="zeus_diff", rank="1", window="w")
