"""erg.Recorder and erg.report: a Python program records its power timelines and windows in an
erg record (the format of `erg run --record`, docs/report.md) and renders the HTML page."""

import json
import sqlite3
import time

import pytest

import erg


def test_record_and_report(tmp_path, machine):
    path = tmp_path / "run.ergrec"
    machine.set_utilization(0, 0.9)
    try:
        with erg.PowerMonitor(gpu_indices=[0, 1], cpus=False, period=0.02) as pm:
            with erg.Recorder(path, pm) as rec:
                mon = erg.EnergyMonitor(gpu_indices=[0, 1], cpu_indices=[])
                mon.begin_window("work")
                time.sleep(0.4)
                m = mon.end_window("work")
                rec.add_measurement(m)
                rec.flush()  # a second batch comes with close()
                time.sleep(0.3)  # samples after the window: the timeline outlasts it (last >= 0.4)
                rec.add_event("power_limit.profile", {"power_limit_w": 300, "energy_j": 10.0, "time_s": 1.0})
                rec.add_event("power_limit.profile", {"power_limit_w": 250, "energy_j": 8.0, "time_s": 1.1})
                rec.add_event("power_limit.chosen", {"power_limit_w": 250})
    finally:
        machine.set_utilization(0, 0.0)

    db = sqlite3.connect(path)
    meta = dict(db.execute("SELECT key, value FROM meta"))
    assert meta["format"] == "erg-record" and meta["simulated"] == "1" and meta["status"] == "complete"
    devices = db.execute("SELECT id, kind, idx, domain FROM devices ORDER BY id").fetchall()
    assert [(d[1], d[2]) for d in devices] == [("gpu", 0), ("gpu", 1)]  # cpus=False: GPUs only
    gpu0 = next(d[0] for d in devices if d[1] == "gpu" and d[2] == 0)
    n, first, last, top = db.execute(
        "SELECT count(*), min(t_s), max(t_s), max(power_w) FROM samples WHERE device = ?", (gpu0,)).fetchone()
    assert n >= 3 and first >= 0 and last >= 0.4  # A100 power changes every ~100 ms
    (name, start, end, energy), = db.execute(
        "SELECT name, start_s, end_s, energy_j FROM windows JOIN window_energy ON window = windows.id "
        "WHERE device = ?", (gpu0,)).fetchall()
    assert name == "work" and end - start == pytest.approx(m.time, abs=1e-3)
    assert energy == pytest.approx(m.gpu_energy[0])
    # GPU 0 was loaded, GPU 1 idle: the record shows it.
    idle_top = db.execute("SELECT max(power_w) FROM samples JOIN devices ON id = device WHERE kind = 'gpu' AND idx = 1"
                          ).fetchone()[0]
    assert top > idle_top + 50

    html = erg.report(path, tmp_path / "report.html", title="python run")
    assert (tmp_path / "report.html").read_text() == html
    assert 'id="power-chart"' in html and "<td>work</td>" in html and "python run" in html
    assert '<tr class="chosen"><td>250</td>' in html
    data = json.loads(html.split('<script id="erg-data" type="application/json">')[1].split("</script>")[0])
    assert len(data["timeline"]["series"]) == len(devices)
    assert max(v for v in data["timeline"]["series"][0] if v is not None) == pytest.approx(top, abs=1e-3)

    both = erg.report([path, path])
    assert 'id="power-chart-1"' in both


def test_recorder_without_a_record_needs_erg_run(monkeypatch):
    monkeypatch.delenv("ERG_RECORD", raising=False)
    with pytest.raises(ValueError, match="ERG_RECORD"):
        erg.Recorder()


def test_report_of_a_file_that_is_not_a_record(tmp_path):
    bad = tmp_path / "bad.ergrec"
    bad.write_text("not sqlite")
    with pytest.raises(erg.ErgError):
        erg.report(bad)


def test_windows_from_python_under_erg_run_record(tmp_path):
    """Under `erg run --record` (ERG_RECORD), a Python program adds its windows to erg run's record,
    on erg run's time axis."""
    import os
    import pathlib
    import subprocess

    from conftest import PYTHON, child_env

    erg_cli = pathlib.Path(os.environ.get("ERG_BINARY_DIR", "build/dev")) / "cli" / "erg"
    assert erg_cli.exists(), f"the erg command is not at {erg_cli} (set ERG_BINARY_DIR to the build directory)"
    path = tmp_path / "run.ergrec"
    script = ("import erg, time\n"
              "r = erg.Recorder(); t = time.monotonic(); time.sleep(0.3)\n"
              "r.add_window('from python', t, time.monotonic()); r.add_event('note', {'x': 1})\n")
    env = child_env()
    env.pop("ERG_SIMULATE", None)
    env.pop("ERG_SIM_STATE", None)
    subprocess.run([str(erg_cli), "--simulate", "1xA100,cpus=0", "run", "--record", str(path), "--", PYTHON, "-c",
                    script], env=env, check=True, capture_output=True, timeout=60)
    db = sqlite3.connect(path)
    windows = dict((n, (s, e)) for n, s, e in db.execute("SELECT name, start_s, end_s FROM windows"))
    run_start, run_end = windows["erg.run"]
    start, end = windows["from python"]
    assert run_start <= start < end <= run_end and end - start == pytest.approx(0.3, abs=0.1)
    assert db.execute("SELECT kind, data FROM events").fetchall() == [("note", '{"x":1}')]
