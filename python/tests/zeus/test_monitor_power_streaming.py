"""erg.compat.zeus.monitor.power_streaming (and the zeusd client under it) against
reference/zeus.md §1.6, §1.9 and §9 (10), streaming from erg's ergd (the zeusd HTTP API) attached
to the suite's simulated machine."""

import asyncio
import os
import subprocess
import threading
import time
from dataclasses import fields

import pytest
from conftest import child_env
from zeus_helpers import EMPTY, params

import erg
from erg.compat.zeus.device.exception import ZeusBaseGPUError, ZeusdError
from erg.compat.zeus.monitor import power_streaming
from erg.compat.zeus.monitor.power_streaming import CpuPowerReading, PowerReadings, PowerStreamingClient
from erg.compat.zeus.utils.zeusd import ZeusdCapabilityError, ZeusdClient, ZeusdConfig, ZeusdConnectionError

ERGD = os.path.join(os.environ.get("ERG_BINARY_DIR", ""), "daemon", "ergd")


def start_ergd(sock, *args):
    if not os.access(ERGD, os.X_OK):
        pytest.skip("ergd is not built (ERG_BINARY_DIR/daemon/ergd)")
    env = child_env()
    for k in ("ERG_DAEMON_SOCK", "ZEUSD_SOCK_PATH"):
        env.pop(k, None)
    proc = subprocess.Popen([ERGD, "--socket-path", str(sock), *args], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            ZeusdClient(ZeusdConfig.uds(str(sock)))
            return proc
        except ZeusdConnectionError:
            assert proc.poll() is None, proc.stderr.read()
            time.sleep(0.05)
    proc.kill()
    pytest.fail("ergd did not start")


@pytest.fixture(scope="module")
def ergd(machine, tmp_path_factory):
    sock = tmp_path_factory.mktemp("ergd") / "ergd.sock"
    proc = start_ergd(sock)
    yield str(sock)
    proc.terminate()
    proc.wait(timeout=10)


def wait_for(client, done, seconds=5.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        r = client.get_power()
        if done(r):
            return r
        time.sleep(0.05)
    pytest.fail(f"no such readings within {seconds} s: {client.get_power()}")


def test_public_names_and_signatures():
    assert power_streaming.__all__ == ["CpuPowerReading", "PowerReadings", "PowerStreamingClient"]
    assert [(f.name, f.default) for f in fields(CpuPowerReading)] == [("cpu_w", 0.0), ("dram_w", None)]
    r = PowerReadings()
    assert (r.timestamp_s, r.gpu_power_w, r.cpu_power_w) == (0.0, {}, {})
    assert params(PowerStreamingClient.__init__) == [("servers", EMPTY), ("reconnect_delay_s", 1.0)]
    assert params(PowerStreamingClient.get_power) == [] and params(PowerStreamingClient.stop) == []
    assert params(ZeusdConfig) == [("host_port", None), ("socket_path", None), ("token", None),
                                   ("gpu_indices", None), ("cpu_indices", None)]


def test_streams_gpu_and_cpu_power(ergd, machine):
    machine.set_utilization(1, 1.0)
    client = PowerStreamingClient([ZeusdConfig.uds(ergd, gpu_indices=[0, 1])])
    try:
        r = wait_for(client, lambda r: {0, 1} <= set(r[ergd].gpu_power_w) and {0, 1} <= set(r[ergd].cpu_power_w))[ergd]
        time.sleep(0.3)
        r = client.get_power()[ergd]
        assert set(r.gpu_power_w) == {0, 1}  # only the GPUs asked for
        assert r.gpu_power_w[1] == pytest.approx(machine.mean_power(1), rel=0.1) and r.gpu_power_w[1] > r.gpu_power_w[0]
        cpu = r.cpu_power_w[0]
        assert isinstance(cpu, CpuPowerReading) and cpu.cpu_w > 0 and cpu.dram_w is not None
        assert abs(r.timestamp_s - time.time()) < 2.0  # moved onto this machine's time.time()
        snapshot = client.get_power()
        snapshot[ergd].gpu_power_w[0] = -1.0
        snapshot[ergd].cpu_power_w[0].cpu_w = -1.0
        again = client.get_power()[ergd]
        assert again.gpu_power_w[0] != -1.0 and again.cpu_power_w[0].cpu_w != -1.0  # a deep copy
    finally:
        client.stop()
        machine.set_utilization(1, 0.0)


def test_iterators_yield_until_stopped(ergd, machine):
    client = PowerStreamingClient([ZeusdConfig.uds(ergd, gpu_indices=[2], cpu_indices=[])])
    got = []

    def consume():
        for readings in client:
            got.append(readings)

    t = threading.Thread(target=consume)
    t.start()
    machine.set_utilization(2, 0.8)
    try:
        deadline = time.monotonic() + 5
        while len(got) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(got) >= 3 and set(got[-1][ergd].gpu_power_w) == {2} and got[-1][ergd].cpu_power_w == {}
    finally:
        t0 = time.monotonic()
        client.stop()
        t.join(timeout=5)
        machine.set_utilization(2, 0.0)
    assert not t.is_alive() and time.monotonic() - t0 < 3  # stop() ends the iteration

    async def main():
        client2 = PowerStreamingClient([ZeusdConfig.uds(ergd, gpu_indices=[3], cpu_indices=[])])
        ticks = 0

        async def tick():
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        ticker = asyncio.create_task(tick())
        seen = 0
        t0 = time.monotonic()
        async for readings in client2:
            assert set(readings[ergd].gpu_power_w) == {3}
            seen += 1
            if time.monotonic() - t0 > 0.6:
                client2.stop()
        ticker.cancel()
        return seen, ticks

    machine.set_utilization(3, 0.6)
    try:
        seen, ticks = asyncio.run(main())
    finally:
        machine.set_utilization(3, 0.0)
    # The loop kept running while the iterator waited: a blocking wait would let the ticker run
    # only between yields (about once per event), not every 10 ms.
    assert seen >= 2 and ticks > 2 * seen and ticks > 20


def test_errors(ergd, tmp_path):
    with pytest.raises(ValueError, match="Duplicate zeusd endpoint"):
        PowerStreamingClient([ZeusdConfig.uds(ergd), ZeusdConfig.uds(ergd)])
    with pytest.raises(ValueError, match=r"GPU indices \[9\] requested .* but only \[0, 1, 2, 3\] are available"):
        PowerStreamingClient([ZeusdConfig.uds(ergd, gpu_indices=[0, 9])])
    with pytest.raises(ZeusdConnectionError) as e:
        PowerStreamingClient([ZeusdConfig.uds(str(tmp_path / "nobody.sock"))])
    assert isinstance(e.value, ZeusdError) and isinstance(e.value, ZeusBaseGPUError)


def test_a_group_the_daemon_does_not_serve(machine, tmp_path):
    sock = tmp_path / "gpu-only.sock"
    proc = start_ergd(sock, "--enable", "gpu-control,gpu-read")
    try:
        client = PowerStreamingClient([ZeusdConfig.uds(str(sock), gpu_indices=[0])])  # CPUs: none served, skipped
        wait_for(client, lambda r: 0 in r[str(sock)].gpu_power_w)
        assert client.get_power()[str(sock)].cpu_power_w == {}
        client.stop()
        with pytest.raises(ZeusdCapabilityError, match=r"^Zeusd at .*gpu-only.sock: cpu-read is not enabled"):
            PowerStreamingClient([ZeusdConfig.uds(str(sock), cpu_indices=[0])])
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_zeusd_client(ergd, machine):
    client = ZeusdClient(ZeusdConfig.uds(ergd))
    assert client.gpu_ids == [0, 1, 2, 3] and client.cpu_ids == [0, 1]
    assert client.gpus[0].name == "NVIDIA A100-SXM4-80GB" and client.gpus[0].cumulative_energy_available
    assert client.can_read_gpu and client.can_control_gpu and client.can_read_cpu and not client.auth_required
    assert abs(client.get_time() / 1000 - time.time()) < 2
    assert set(client.get_gpu_power([0, 1]).power_mw) == {0, 1}
    assert client.get_power_limit_constraints([0]) == {0: (100_000, 400_000)}
    e0 = client.get_gpu_energy([0])[0]
    time.sleep(0.15)
    assert client.get_gpu_energy([0])[0] > e0  # mJ
    with pytest.raises(ZeusdError, match=r"^Failed to get GPU power: .*Unknown GPU indices: \[7\]"):
        client.get_gpu_power([7])
    assert ZeusdConfig.uds(ergd).url("/discover") == "http://localhost/discover"
    status, body = ZeusdConfig.uds(ergd).make_client().get("/time")  # http.client, not httpx (documented)
    assert status == 200 and b"timestamp_ms" in body
    assert ZeusdConfig.tcp("node1", 4938).endpoint == "node1:4938"
    assert erg.compat.zeus.utils.zeusd.ZeusdConfig is ZeusdConfig
