"""erg.carbon and erg.compat.zeus.monitor.{carbon,price} on the simulated machine, with a
loopback server speaking ElectricityMaps' and OpenEI's documented formats (no network)."""

import json
import threading
import time
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import erg
import erg.carbon
from erg.compat.zeus.monitor import carbon as zcarbon
from erg.compat.zeus.monitor import price as zprice

from zeus.zeus_helpers import params, EMPTY  # noqa: E402  (python/tests/zeus)


class Loopback:
    """A loopback HTTP server: ``handler(path, headers) -> (status, body)``; records requests."""

    def __init__(self, handler):
        self.requests = []
        outer = self

        class H(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                outer.requests.append((self.path, dict(self.headers)))
                status, body = handler(self.path)
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def emaps_handler(g_per_kwh, status=200):
    def handle(path):
        if status != 200:
            return status, json.dumps({"message": "upstream failure"})
        now = datetime.now(timezone.utc).replace(minute=0, second=0, microsecond=0)

        def point(t):
            return {"zone": "DE", "carbonIntensity": g_per_kwh, "isEstimated": False,
                    "datetime": t.strftime("%Y-%m-%dT%H:%M:%S.000Z")}

        if "/latest" in path:
            return 200, json.dumps(point(now))
        hist = [point(datetime.fromtimestamp(now.timestamp() - 3600 * k, timezone.utc)) for k in range(24, 0, -1)]
        return 200, json.dumps({"zone": "DE", "history": hist})

    return handle


@pytest.fixture
def loopback():
    servers = []

    def make(handler):
        s = Loopback(handler)
        servers.append(s)
        return s

    yield make
    for s in servers:
        s.close()


def busy(seconds=0.3):
    time.sleep(seconds)


def test_offline_zone_carbon_is_energy_times_the_yearly_average(machine):
    m = erg.carbon.CarbonMonitor("DE", gpu_indices=[0], cpu_indices=[0])
    m.begin_window("w")
    busy()
    r = m.end_window("w")
    assert r.total_energy > 0
    assert r.carbon_g == pytest.approx(r.total_energy / 3.6e6 * 341.0, rel=1e-12)
    assert r.providers == ["offline"] and r.resolution == "yearly"
    assert "2024" in r.sources[0] and "Electricity Maps" in r.sources[0]
    assert r.carbon_g_by_device["gpu0"] == pytest.approx(r.measurement.gpu_energy[0] / 3.6e6 * 341.0)
    assert sum(h["total_energy"] for h in r.hours) == pytest.approx(r.total_energy)


def test_unknown_zone_is_a_clear_error(machine):
    with pytest.raises(erg.NotFoundError, match="'ZZ'"):
        erg.carbon.CarbonMonitor("ZZ")
    with pytest.raises(ValueError):  # erg's NotFoundError is also a ValueError
        erg.carbon.offline("ZZ")


def test_failing_service_falls_back_offline_and_keeps_the_energy(machine, loopback):
    server = loopback(emaps_handler(0, status=503))
    provider = erg.carbon.electricity_maps(zone="DE", base_url=server.url + "/v3", timeout_s=2)
    m = erg.carbon.CarbonMonitor(provider, gpu_indices=[0], cpu_indices=[])
    m.begin_window("w")
    busy()
    r = m.end_window("w")
    assert r.total_energy > 0
    assert r.carbon_g == pytest.approx(r.total_energy / 3.6e6 * 341.0)
    assert r.providers == ["offline"]
    assert any("HTTP 503" in w for w in r.warnings)


def test_cost_monitor_flat_price(machine):
    m = erg.carbon.CostMonitor(0.3, gpu_indices=[0, 1], cpu_indices=[], currency="EUR")
    m.begin_window("w")
    busy()
    r = m.end_window("w")
    assert r.currency == "EUR"
    assert r.cost == pytest.approx(r.total_energy / 3.6e6 * 0.3)


# ---- Zeus names -------------------------------------------------------------------------------

def test_zeus_signatures():
    assert params(zcarbon.CarbonEmissionMonitor.__init__) == [
        ("carbon_intensity_provider", EMPTY), ("gpu_indices", None), ("cpu_indices", None),
        ("sync_execution_with", "torch")]
    assert params(zcarbon.ElectrictyMapsClient.__init__)[:3] == [
        ("location", EMPTY), ("estimate", False), ("emission_factor_type", "direct")]
    assert params(zprice.OpenEIClient.__init__)[:4] == [
        ("location", EMPTY), ("label", EMPTY), ("sector", "Residential"), ("radius", 0)]
    assert params(zprice.EnergyCostMonitor.__init__) == [
        ("electricity_price_provider", EMPTY), ("gpu_indices", None), ("cpu_indices", None),
        ("sync_execution_with", "torch")]
    assert issubclass(zcarbon.ZeusCarbonIntensityHTTPError, erg.UnavailableError)
    assert issubclass(zcarbon.ZeusCarbonIntensityNotFoundError, erg.NotFoundError)


def test_zeus_carbon_monitor_with_electricity_maps_sends_the_token(machine, loopback):
    server = loopback(emaps_handler(250.0))
    client = zcarbon.ElectrictyMapsClient((52.52, 13.405), token="tok", base_url=server.url + "/v3")
    assert client.get_current_carbon_intensity() == 250.0
    m = zcarbon.CarbonEmissionMonitor(client, gpu_indices=[0, 1], cpu_indices=[0])
    m.begin_window("w")
    busy()
    r = m.end_window("w")
    for g in (0, 1):
        assert r.gpu_energy[g] > 0
        assert r.gpu_carbon_emission[g] == pytest.approx(r.gpu_energy[g] / 3.6e6 * 250.0)
    assert r.cpu_carbon_emission[0] == pytest.approx(r.cpu_energy[0] / 3.6e6 * 250.0)
    assert all(h.get("auth-token") == "tok" for _, h in server.requests)
    assert "lat=52.52" in server.requests[0][0]


def test_zeus_carbon_monitor_never_hangs_when_the_service_fails(machine, loopback):
    # Zeus's end_window hangs here (its background process dies); erg raises, keeping the energy.
    server = loopback(emaps_handler(0, status=500))
    client = zcarbon.ElectrictyMapsClient((52.52, 13.405), base_url=server.url + "/v3", timeout_s=2)
    m = zcarbon.CarbonEmissionMonitor(client, gpu_indices=[0], cpu_indices=[])
    m.begin_window("w")
    busy(0.1)
    with pytest.raises(zcarbon.ZeusCarbonIntensityNotFoundError) as e:
        m.end_window("w")
    assert e.value.measurement.gpu_energy[0] > 0
    assert "HTTP 500" in str(e.value)


def test_zeus_custom_provider(machine):
    class Constant(zcarbon.CarbonIntensityProvider):
        def get_current_carbon_intensity(self):
            return 100.0

        def get_recent_carbon_intensity(self):
            return {}

        update_period = property(lambda self: None)
        history_length = property(lambda self: 24)

    m = zcarbon.CarbonEmissionMonitor(Constant(), gpu_indices=[0], cpu_indices=[])
    m.begin_window("w")
    busy(0.1)
    r = m.end_window("w")
    assert r.gpu_carbon_emission[0] == pytest.approx(r.gpu_energy[0] / 3.6e6 * 100.0)
    assert r.cpu_energy is None


def test_zeus_cost_monitor_applies_tiers_and_adjustments(machine, loopback):
    weekday = [[0] * 24 for _ in range(12)]
    rate = {"label": "abc", "name": "Flat", "energyratestructure": [[{"max": 1000, "rate": 0.10, "adj": 0.02},
                                                                     {"rate": 0.30}]],
            "energyweekdayschedule": weekday, "energyweekendschedule": weekday}
    server = loopback(lambda path: (200, json.dumps({"items": [rate]})))
    client = zprice.OpenEIClient((37.0, -122.0), "abc", api_key="k", time_zone="UTC", base_url=server.url)
    m = zprice.EnergyCostMonitor(client, gpu_indices=[0], cpu_indices=[])
    m.begin_window("w")
    busy(0.1)
    r = m.end_window("w")
    # Zeus would charge 0.10 (the first tier's rate only); OpenEI documents rate + adj.
    assert r.gpu_energy_cost[0] == pytest.approx(r.gpu_energy[0] / 3.6e6 * 0.12)
    assert "getpage=abc" in server.requests[0][0] and "api_key=k" in server.requests[0][0]


def test_zeus_carbon_windows_count_all_their_energy(machine):
    # Zeus's background process starts measuring ~1.3 s after begin_window; erg's windows are the
    # native monitor's, so a short window has the energy an EnergyMonitor window over it has.
    m = zcarbon.CarbonEmissionMonitor(_Fixed(), gpu_indices=[0], cpu_indices=[])
    ref = erg.EnergyMonitor(gpu_indices=[0], cpu_indices=[])
    ref.begin_window("ref")
    m.begin_window("w")
    busy(0.5)
    r = m.end_window("w")
    e = ref.end_window("ref")
    assert r.time == pytest.approx(e.time, abs=0.05)
    assert r.gpu_energy[0] == pytest.approx(e.gpu_energy[0], rel=0.1)
    assert not hasattr(zprice.OpenEIClient, "get_current_electricity_prices")  # not mirrored (docs)


class _Fixed(zcarbon.CarbonIntensityProvider):
    def get_current_carbon_intensity(self):
        return 100.0

    def get_recent_carbon_intensity(self):
        return {}

    update_period = property(lambda self: None)
    history_length = property(lambda self: 24)
