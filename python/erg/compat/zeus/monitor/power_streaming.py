"""PowerStreamingClient (``zeus.monitor.power_streaming``): live GPU and CPU power from one or
more zeusd daemons (or erg's ergd, which serves the same API) over server-sent events.

    from erg.compat.zeus.monitor.power_streaming import PowerStreamingClient
    from erg.compat.zeus.utils.zeusd import ZeusdConfig
    client = PowerStreamingClient([ZeusdConfig.uds("/run/ergd/ergd.sock")])
    client.get_power()          # {"/run/ergd/ergd.sock": PowerReadings(timestamp_s, gpu_power_w, cpu_power_w)}
    client.stop()
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import socket
import statistics
import threading
import time
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable, Dict, Iterator, List, Optional, Sequence

from erg._errors import InvalidArgumentError

from ..utils.zeusd import ZeusdClient, ZeusdConfig, require_capabilities

__all__ = ["CpuPowerReading", "PowerReadings", "PowerStreamingClient"]

logger = logging.getLogger("zeus.monitor.power_streaming")

_OFFSET_PROBES = 5  # GET /time round trips; the median is the clock offset


@dataclass
class CpuPowerReading:
    """One CPU package's power: package (W) and DRAM (W; None without a DRAM domain)."""

    cpu_w: float = 0.0
    dram_w: Optional[float] = None


@dataclass
class PowerReadings:
    """The latest power from one daemon: ``timestamp_s`` (this machine's ``time.time()``, the
    newest event's), ``gpu_power_w`` and ``cpu_power_w`` by device id."""

    timestamp_s: float = 0.0
    gpu_power_w: Dict[int, float] = field(default_factory=dict)
    cpu_power_w: Dict[int, CpuPowerReading] = field(default_factory=dict)


class _Rejected(Exception):
    """The daemon refused the stream (HTTP status in ``args[0]``)."""


class PowerStreamingClient:
    """Streams power from each daemon in ``servers`` in background threads (one per device
    type per daemon), reconnecting ``reconnect_delay_s`` after a lost connection.

    For each daemon, ``gpu_indices``/``cpu_indices`` of its ZeusdConfig choose what to stream:
    None, everything it serves and permits; [], nothing; a list, those ids, which must exist
    (ValueError) and be permitted (ZeusdCapabilityError). Two configs for one endpoint are a
    ValueError; an unreachable daemon a ZeusdConnectionError. Event timestamps are moved to this
    machine's clock by an offset measured at start (the median of five ``GET /time`` round trips).
    """

    def __init__(self, servers: Sequence[ZeusdConfig], reconnect_delay_s: float = 1.0) -> None:
        servers = list(servers)
        endpoints = [s.endpoint for s in servers]
        for ep in endpoints:
            if endpoints.count(ep) > 1:
                raise InvalidArgumentError(f"Duplicate zeusd endpoint: {ep}")
        self._reconnect_delay_s = reconnect_delay_s
        self._lock = threading.Lock()
        self._updated = threading.Condition(self._lock)
        self._readings: Dict[str, PowerReadings] = {}
        self._stop = threading.Event()
        self._threads: List[threading.Thread] = []
        self._connections: set = set()
        plans = []
        for server in servers:
            client = ZeusdClient(server)
            gpu_ids = self._resolve(client, server.gpu_indices, client.gpu_ids, client.can_read_gpu, "GPU")
            cpu_ids = self._resolve(client, server.cpu_indices, client.cpu_ids, client.can_read_cpu, "CPU")
            offset = self._clock_offset(client)
            plans.append((server, gpu_ids, cpu_ids, offset))
            self._readings[server.endpoint] = PowerReadings()
        for server, gpu_ids, cpu_ids, offset in plans:
            if gpu_ids:
                self._start(server, "/gpu/stream_power", "gpu_ids", gpu_ids, server.gpu_indices is None, offset,
                            self._on_gpu_event)
            if cpu_ids:
                self._start(server, "/cpu/stream_power", "cpu_ids", cpu_ids, server.cpu_indices is None, offset,
                            self._on_cpu_event)

    @staticmethod
    def _resolve(client: ZeusdClient, wanted: Optional[List[int]], available: List[int], permitted: bool,
                 what: str) -> List[int]:
        if wanted is None:
            if not permitted:
                logger.info("%s power is not streamed from %s: not enabled or not granted", what, client.endpoint)
                return []
            return list(available)
        if not wanted:
            return []
        missing = sorted(set(wanted) - set(available))
        if missing:
            raise InvalidArgumentError(
                f"{what} indices {missing} requested for {client.endpoint} but only {sorted(available)} are available"
            )
        require_capabilities(client, read_gpu=what == "GPU", read_cpu=what == "CPU")
        return list(wanted)

    @staticmethod
    def _clock_offset(client: ZeusdClient) -> float:
        """This machine's time.time() minus the daemon's clock, s."""
        samples = []
        for _ in range(_OFFSET_PROBES):
            before = time.time()
            daemon = client.get_time() / 1000.0
            after = time.time()
            samples.append((before + after) / 2.0 - daemon)
        return statistics.median(samples)

    def _start(self, server: ZeusdConfig, path: str, ids_param: str, ids: List[int], everything: bool,
               offset: float, on_event: Callable[[str, Dict[str, Any], float], None]) -> None:
        target = path if everything else f"{path}?{ids_param}={','.join(str(i) for i in ids)}"
        thread = threading.Thread(
            target=self._stream_loop, args=(server, target, offset, on_event),
            name=f"{'gpu' if ids_param == 'gpu_ids' else 'cpu'}-power-stream-{server.endpoint}", daemon=True,
        )
        thread.start()
        self._threads.append(thread)
        logger.info("Started power streaming thread for %s (%s)", server.endpoint, target)

    def _stream_loop(self, server: ZeusdConfig, target: str, offset: float,
                     on_event: Callable[[str, Dict[str, Any], float], None]) -> None:
        http = server.make_client(timeout=None)
        while not self._stop.is_set():
            try:
                self._stream_once(http, server.endpoint, target, offset, on_event)
            except _Rejected as e:
                if e.args[0] in (401, 403):
                    logger.warning("Power stream %s at %s refused (HTTP %d); not retrying", target, server.endpoint,
                                   e.args[0])
                    return
                self._retry_later(server, target, f"HTTP {e.args[0]}")
            except (OSError, ValueError) as e:
                self._retry_later(server, target, str(e))

    def _retry_later(self, server: ZeusdConfig, target: str, why: str) -> None:
        if not self._stop.is_set():
            logger.warning("Power stream %s at %s lost (%s), reconnecting in %.1f s", target, server.endpoint, why,
                           self._reconnect_delay_s)
            self._stop.wait(self._reconnect_delay_s)

    def _stream_once(self, http: Any, endpoint: str, target: str, offset: float,
                     on_event: Callable[[str, Dict[str, Any], float], None]) -> None:
        conn = http.connection(timeout=None)
        with self._lock:
            if self._stop.is_set():
                return
            self._connections.add(conn)
        try:
            conn.request("GET", target, headers={"Accept": "text/event-stream", **http.headers()})
            response = conn.getresponse()
            if self._stop.is_set():  # stop() ran before this connection had a socket to shut down
                return
            if response.status != 200:
                raise _Rejected(response.status)
            data: List[str] = []
            while not self._stop.is_set():
                line = response.readline()
                if not line:
                    raise ConnectionError("the daemon closed the stream")
                text = line.decode("utf-8").rstrip("\r\n")
                if text.startswith("data:"):
                    data.append(text[5:].strip())
                elif not text and data:
                    on_event(endpoint, json.loads("\n".join(data)), offset)
                    data = []
        finally:
            with self._lock:
                self._connections.discard(conn)
            conn.close()

    def _on_gpu_event(self, endpoint: str, event: Dict[str, Any], offset: float) -> None:
        with self._updated:
            r = self._readings[endpoint]
            r.gpu_power_w[int(event["gpu_id"])] = event["power_mw"] / 1000.0
            r.timestamp_s = max(r.timestamp_s, event["timestamp_ms"] / 1000.0 + offset)
            self._updated.notify_all()

    def _on_cpu_event(self, endpoint: str, event: Dict[str, Any], offset: float) -> None:
        dram = event.get("dram_mw")
        with self._updated:
            r = self._readings[endpoint]
            r.cpu_power_w[int(event["cpu_id"])] = CpuPowerReading(
                cpu_w=event["cpu_mw"] / 1000.0, dram_w=None if dram is None else dram / 1000.0
            )
            r.timestamp_s = max(r.timestamp_s, event["timestamp_ms"] / 1000.0 + offset)
            self._updated.notify_all()

    def get_power(self) -> Dict[str, PowerReadings]:
        """The latest readings by endpoint (a copy)."""
        with self._lock:
            return copy.deepcopy(self._readings)

    def __iter__(self) -> Iterator[Dict[str, PowerReadings]]:
        """Yields ``get_power()`` each time an event arrives, until ``stop()``."""
        while not self._stop.is_set():
            if self._wait_for_update():
                yield self.get_power()

    async def __aiter__(self) -> AsyncIterator[Dict[str, PowerReadings]]:
        """As ``__iter__``, waiting in an executor thread so the event loop is not blocked."""
        loop = asyncio.get_running_loop()
        while not self._stop.is_set():
            if await loop.run_in_executor(None, self._wait_for_update):
                yield self.get_power()

    def _wait_for_update(self) -> bool:
        with self._updated:
            if self._stop.is_set():
                return False
            return self._updated.wait(timeout=1.0) and not self._stop.is_set()

    def stop(self) -> None:
        """Closes the streams, joins the threads and ends the iterators. Idempotent."""
        self._stop.set()
        with self._updated:
            for conn in list(self._connections):
                if conn.sock is not None:
                    try:
                        conn.sock.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
            self._updated.notify_all()
        for thread in self._threads:
            thread.join(timeout=5.0)
        self._threads.clear()
