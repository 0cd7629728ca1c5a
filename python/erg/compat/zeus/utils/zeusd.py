"""The zeusd client (``zeus.utils.zeusd``): ``ZeusdConfig`` (where a daemon listens) and
``ZeusdClient`` (its HTTP API), which ``PowerStreamingClient`` uses. It talks to zeusd or to
erg's ergd, which serves the same API.

HTTP goes through the standard library (``http.client`` over TCP or a Unix socket), not httpx:
``ZeusdConfig.make_client()`` returns that small client, not an ``httpx.Client``.
Environment: ``ZEUSD_SOCK_PATH`` (a Unix socket, first), ``ZEUSD_HOST_PORT`` (``host:port``),
``ZEUSD_TOKEN`` (a bearer token).
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Tuple

from ..device.exception import ZeusdError

__all__ = [
    "ZeusdConfig", "ZeusdClient", "GpuInfo", "CpuInfo", "GpuPowerSnapshot", "CpuPowerSnapshot", "CpuEnergyResult",
    "ZeusdError", "ZeusdConnectionError", "ZeusdAuthError", "ZeusdCapabilityError", "require_capabilities",
]


class ZeusdConnectionError(ZeusdError):
    """The daemon cannot be reached, or did not answer discovery as zeusd does."""


class ZeusdAuthError(ZeusdError):
    """The daemon needs a token and the one given (or none) was refused."""


class ZeusdCapabilityError(ZeusdError):
    """The daemon does not serve, or the token does not grant, what was asked."""


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: Optional[float]) -> None:
        super().__init__("localhost", timeout=timeout)
        self._unix_path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self._unix_path)
        self.sock = sock


class _HttpClient:
    """One daemon's HTTP API, a connection per request (``http.client``)."""

    def __init__(self, config: "ZeusdConfig", timeout: Optional[float] = 5.0) -> None:
        self._config = config
        self._timeout = timeout

    def connection(self, timeout: Optional[float] = None) -> http.client.HTTPConnection:
        t = self._timeout if timeout is None else timeout
        if self._config.socket_path is not None:
            return _UnixHTTPConnection(self._config.socket_path, t)
        host, _, port = (self._config.host_port or "").rpartition(":")
        return http.client.HTTPConnection(host, int(port), timeout=t)

    def headers(self) -> Dict[str, str]:
        return {"Authorization": f"Bearer {self._config.token}"} if self._config.token else {}

    @staticmethod
    def target(path: str, params: Optional[Dict[str, Any]] = None) -> str:
        if not params:
            return path
        def text(v: Any) -> str:
            if isinstance(v, bool):
                return "true" if v else "false"
            if isinstance(v, (list, tuple)):
                return ",".join(str(x) for x in v)
            return str(v)
        return path + "?" + urllib.parse.urlencode({k: text(v) for k, v in params.items() if v is not None})

    def request(self, method: str, path: str, params: Optional[Dict[str, Any]] = None) -> Tuple[int, bytes]:
        """(status, body). OSError when the daemon cannot be reached."""
        conn = self.connection()
        try:
            conn.request(method, self.target(path, params), headers=self.headers())
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def get(self, path: str, params: Optional[Dict[str, Any]] = None) -> Tuple[int, bytes]:
        return self.request("GET", path, params)

    def post(self, path: str, params: Optional[Dict[str, Any]] = None) -> Tuple[int, bytes]:
        return self.request("POST", path, params)


@dataclass
class ZeusdConfig:
    """Where a zeusd (or ergd) listens: ``socket_path`` (a Unix socket) or ``host_port``
    (``"host:port"``), a bearer ``token``, and which GPUs and CPUs a streaming client wants
    (None: all available; []: none)."""

    host_port: Optional[str] = None
    socket_path: Optional[str] = None
    token: Optional[str] = None
    gpu_indices: Optional[List[int]] = None
    cpu_indices: Optional[List[int]] = None

    @classmethod
    def tcp(cls, host: str, port: int, *, token: Optional[str] = None, gpu_indices: Optional[List[int]] = None,
            cpu_indices: Optional[List[int]] = None) -> "ZeusdConfig":
        return cls(host_port=f"{host}:{port}", token=token, gpu_indices=gpu_indices, cpu_indices=cpu_indices)

    @classmethod
    def uds(cls, socket_path: str, *, token: Optional[str] = None, gpu_indices: Optional[List[int]] = None,
            cpu_indices: Optional[List[int]] = None) -> "ZeusdConfig":
        return cls(socket_path=socket_path, token=token, gpu_indices=gpu_indices, cpu_indices=cpu_indices)

    @classmethod
    def from_env(cls) -> Optional["ZeusdConfig"]:
        """From ZEUSD_SOCK_PATH (first) or ZEUSD_HOST_PORT, with ZEUSD_TOKEN; None if neither is set."""
        token = os.environ.get("ZEUSD_TOKEN") or None
        if os.environ.get("ZEUSD_SOCK_PATH"):
            return cls(socket_path=os.environ["ZEUSD_SOCK_PATH"], token=token)
        if os.environ.get("ZEUSD_HOST_PORT"):
            return cls(host_port=os.environ["ZEUSD_HOST_PORT"], token=token)
        return None

    @property
    def endpoint(self) -> str:
        """The socket path, or ``host:port``."""
        return self.socket_path if self.socket_path is not None else (self.host_port or "")

    def url(self, path: str) -> str:
        return f"http://localhost{path}" if self.socket_path is not None else f"http://{self.host_port}{path}"

    def make_client(self, timeout: Optional[float] = 5.0) -> _HttpClient:
        """A client for this daemon (``http.client``; ``.get(path, params)`` and ``.post``
        return ``(status, body)``)."""
        return _HttpClient(self, timeout)


@dataclass
class GpuInfo:
    id: int
    name: str
    pci_address: str
    cumulative_energy_available: bool


@dataclass
class CpuInfo:
    id: int
    dram_available: bool


@dataclass
class GpuPowerSnapshot:
    """Instant power (mW) by GPU id, at ``timestamp_ms`` (the daemon's clock)."""

    timestamp_ms: int
    power_mw: Dict[int, int] = field(default_factory=dict)


@dataclass
class CpuPowerSnapshot:
    """Package and DRAM power (mW; DRAM None without a DRAM domain) by CPU id."""

    timestamp_ms: int
    power_mw: Dict[int, Dict[str, Optional[int]]] = field(default_factory=dict)


@dataclass
class CpuEnergyResult:
    cpu_energy_uj: Optional[int]
    dram_energy_uj: Optional[int]


class ZeusdClient:
    """A zeusd (or ergd) daemon's API. Discovers it when built (ZeusdConnectionError if it cannot
    be reached or does not answer as zeusd does); with authentication on, asks who the token is
    (a refusal is kept in ``auth_error``). A call the daemon refuses is a ZeusdError
    ("Failed to <what>: <the daemon's answer>")."""

    def __init__(self, config: Optional[ZeusdConfig] = None) -> None:
        config = config if config is not None else ZeusdConfig.from_env()
        if config is None:
            raise ZeusdConnectionError("No zeusd endpoint: set ZEUSD_SOCK_PATH or ZEUSD_HOST_PORT, or pass a ZeusdConfig")
        self.config = config
        self.endpoint = config.endpoint
        self._http = config.make_client()
        try:
            status, body = self._http.get("/discover")
        except OSError as e:
            raise ZeusdConnectionError(f"Cannot reach zeusd at {self.endpoint}: {e}") from e
        if status != 200:
            raise ZeusdConnectionError(f"zeusd at {self.endpoint} answered /discover with HTTP {status}: {body!r}")
        try:
            info = json.loads(body)
            self._gpus = [GpuInfo(int(g["id"]), g.get("name", ""), g["pci_address"], bool(g["cumulative_energy_available"]))
                          for g in info.get("gpus", [])]
            self._cpus = [CpuInfo(int(c["id"]), bool(c.get("dram_available", False))) for c in info.get("cpus", [])]
            self._groups = set(info.get("enabled_api_groups", []))
            self._auth_required = bool(info.get("auth_required", False))
        except (ValueError, KeyError, TypeError) as e:
            raise ZeusdConnectionError(f"zeusd at {self.endpoint} answered /discover unexpectedly: {e}") from e
        self._auth_error: Optional[str] = None
        self._scopes: Optional[List[str]] = None
        if self._auth_required:
            status, body = self._http.get("/auth/whoami")
            if status == 200:
                self._scopes = list(json.loads(body).get("scopes", []))
            else:
                self._auth_error = f"HTTP {status}: {body.decode(errors='replace')}"

    # --- what the daemon serves ----------------------------------------------------------------
    @property
    def gpus(self) -> List[GpuInfo]:
        return list(self._gpus)

    @property
    def gpu_ids(self) -> List[int]:
        return [g.id for g in self._gpus]

    @property
    def cpus(self) -> List[CpuInfo]:
        return list(self._cpus)

    @property
    def cpu_ids(self) -> List[int]:
        return [c.id for c in self._cpus]

    @property
    def dram_available(self) -> Dict[int, bool]:
        return {c.id: c.dram_available for c in self._cpus}

    @property
    def auth_required(self) -> bool:
        return self._auth_required

    @property
    def auth_error(self) -> Optional[str]:
        return self._auth_error

    @property
    def granted_scopes(self) -> Optional[List[str]]:
        return None if self._scopes is None else list(self._scopes)

    def _can(self, group: str) -> bool:
        return group in self._groups and (not self._auth_required or group in (self._scopes or []))

    @property
    def can_read_gpu(self) -> bool:
        return self._can("gpu-read")

    @property
    def can_control_gpu(self) -> bool:
        return self._can("gpu-control")

    @property
    def can_read_cpu(self) -> bool:
        return self._can("cpu-read")

    # --- calls ---------------------------------------------------------------------------------
    def _call(self, what: str, method: str, path: str, params: Optional[Dict[str, Any]] = None) -> Any:
        try:
            status, body = self._http.request(method, path, params)
        except OSError as e:
            raise ZeusdConnectionError(f"Failed to {what}: cannot reach zeusd at {self.endpoint}: {e}") from e
        if status != 200:
            raise ZeusdError(f"Failed to {what}: {body.decode(errors='replace')}")
        return json.loads(body) if body else None

    def get_time(self) -> int:
        """The daemon's clock, ms since the Unix epoch."""
        return int(self._call("get time", "GET", "/time")["timestamp_ms"])

    def get_gpu_energy(self, gpu_ids: Iterable[int]) -> Dict[int, int]:
        """Cumulative energy (mJ) by GPU id."""
        data = self._call("get GPU energy", "GET", "/gpu/get_cumulative_energy", {"gpu_ids": list(gpu_ids)})
        return {int(k): int(v["energy_mj"]) for k, v in data.items()}

    def get_gpu_power(self, gpu_ids: Optional[Iterable[int]] = None) -> GpuPowerSnapshot:
        params = None if gpu_ids is None else {"gpu_ids": list(gpu_ids)}
        data = self._call("get GPU power", "GET", "/gpu/get_power", params)
        return GpuPowerSnapshot(int(data["timestamp_ms"]), {int(k): int(v) for k, v in data["power_mw"].items()})

    def get_cpu_energy(self, cpu_ids: Optional[Iterable[int]] = None, cpu: bool = True,
                       dram: bool = True) -> Dict[int, CpuEnergyResult]:
        params: Dict[str, Any] = {"cpu": cpu, "dram": dram}
        if cpu_ids is not None:
            params["cpu_ids"] = list(cpu_ids)
        data = self._call("get CPU energy", "GET", "/cpu/get_cumulative_energy", params)
        return {int(k): CpuEnergyResult(v.get("cpu_energy_uj"), v.get("dram_energy_uj")) for k, v in data.items()}

    def get_cpu_power(self, cpu_ids: Optional[Iterable[int]] = None) -> CpuPowerSnapshot:
        params = None if cpu_ids is None else {"cpu_ids": list(cpu_ids)}
        data = self._call("get CPU power", "GET", "/cpu/get_power", params)
        return CpuPowerSnapshot(int(data["timestamp_ms"]), {int(k): v for k, v in data["power_mw"].items()})

    def get_power_limit(self, gpu_ids: Optional[Iterable[int]] = None) -> Dict[int, int]:
        params = None if gpu_ids is None else {"gpu_ids": list(gpu_ids)}
        data = self._call("get power limit", "GET", "/gpu/get_power_limit", params)
        return {int(k): int(v["power_limit_mw"]) for k, v in data.items()}

    def get_power_limit_constraints(self, gpu_ids: Optional[Iterable[int]] = None) -> Dict[int, Tuple[int, int]]:
        params = None if gpu_ids is None else {"gpu_ids": list(gpu_ids)}
        data = self._call("get power limit constraints", "GET", "/gpu/get_power_limit_constraints", params)
        return {int(k): (int(v["min_power_limit_mw"]), int(v["max_power_limit_mw"])) for k, v in data.items()}

    def get_persistence_mode(self, gpu_ids: Optional[Iterable[int]] = None) -> Dict[int, bool]:
        params = None if gpu_ids is None else {"gpu_ids": list(gpu_ids)}
        data = self._call("get persistence mode", "GET", "/gpu/get_persistence_mode", params)
        return {int(k): bool(v["enabled"]) for k, v in data.items()}

    def set_power_limit(self, gpu_ids: Iterable[int], power_limit_mw: int, block: bool = True) -> None:
        self._call("set power limit", "POST", "/gpu/set_power_limit",
                   {"gpu_ids": list(gpu_ids), "power_limit_mw": int(power_limit_mw), "block": block})

    def set_persistence_mode(self, gpu_ids: Iterable[int], enabled: bool, block: bool = True) -> None:
        self._call("set persistence mode", "POST", "/gpu/set_persistence_mode",
                   {"gpu_ids": list(gpu_ids), "enabled": enabled, "block": block})

    def set_gpu_locked_clocks(self, gpu_ids: Iterable[int], min_clock_mhz: int, max_clock_mhz: int,
                              block: bool = True) -> None:
        self._call("set GPU locked clocks", "POST", "/gpu/set_gpu_locked_clocks",
                   {"gpu_ids": list(gpu_ids), "min_clock_mhz": min_clock_mhz, "max_clock_mhz": max_clock_mhz,
                    "block": block})

    def reset_gpu_locked_clocks(self, gpu_ids: Iterable[int], block: bool = True) -> None:
        self._call("reset GPU locked clocks", "POST", "/gpu/reset_gpu_locked_clocks",
                   {"gpu_ids": list(gpu_ids), "block": block})

    def set_mem_locked_clocks(self, gpu_ids: Iterable[int], min_clock_mhz: int, max_clock_mhz: int,
                              block: bool = True) -> None:
        self._call("set memory locked clocks", "POST", "/gpu/set_mem_locked_clocks",
                   {"gpu_ids": list(gpu_ids), "min_clock_mhz": min_clock_mhz, "max_clock_mhz": max_clock_mhz,
                    "block": block})

    def reset_mem_locked_clocks(self, gpu_ids: Iterable[int], block: bool = True) -> None:
        self._call("reset memory locked clocks", "POST", "/gpu/reset_mem_locked_clocks",
                   {"gpu_ids": list(gpu_ids), "block": block})

    def reset_locked_clocks(self, gpu_ids: Iterable[int], block: bool = True) -> None:
        self._call("reset locked clocks", "POST", "/gpu/reset_locked_clocks", {"gpu_ids": list(gpu_ids), "block": block})


def require_capabilities(client: ZeusdClient, *, read_gpu: bool = False, control_gpu: bool = False,
                         read_cpu: bool = False, gpu_ids: Optional[Iterable[int]] = None,
                         cpu_ids: Optional[Iterable[int]] = None) -> None:
    """ZeusdAuthError if the daemon refused the token; ZeusdCapabilityError ("Zeusd at <endpoint>:
    reason; reason") if it does not serve what is asked (an API group, a scope, GPU or CPU ids)."""
    if client.auth_error is not None:
        raise ZeusdAuthError(f"Zeusd at {client.endpoint}: authentication failed ({client.auth_error})")
    reasons = []
    for wanted, group, can in ((read_gpu, "gpu-read", client.can_read_gpu),
                               (control_gpu, "gpu-control", client.can_control_gpu),
                               (read_cpu, "cpu-read", client.can_read_cpu)):
        if wanted and not can:
            reasons.append(f"{group} is not enabled or not granted")
    for what, ids, have in (("GPU", gpu_ids, client.gpu_ids), ("CPU", cpu_ids, client.cpu_ids)):
        missing = sorted(set(ids or []) - set(have))
        if missing:
            reasons.append(f"{what} ids {missing} are not available (available: {have})")
    if reasons:
        raise ZeusdCapabilityError(f"Zeusd at {client.endpoint}: " + "; ".join(reasons))
