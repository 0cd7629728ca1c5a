"""Recording a run from Python and reporting it as HTML (docs/report.md).

    import erg
    with erg.PowerMonitor() as pm, erg.Recorder("run.ergrec", pm) as rec:
        m = erg.EnergyMonitor()
        m.begin_window("epoch"); train(); rec.add_measurement(m.end_window("epoch"))
    erg.report("run.ergrec", "report.html")

The record is the one `erg run --record` writes (SQLite, format version 1), so `erg report` reads
it too; ``erg.report`` renders with the same native code.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from . import _core

_EPS = 1e-9  # s: the next timeline read starts just after the last sample taken


class Recorder:
    """Writes an erg record: a PowerMonitor's timelines, windows and events.

    Args:
        path: the record to create (replaced if it exists). None: add to the record of the
            ``erg run --record`` this process runs under (``ERG_RECORD``); erg run samples the
            power there, so only windows and events are added.
        power_monitor: an ``erg.PowerMonitor`` whose GPU and CPU timelines are recorded from now;
            ``flush()`` (and ``close()``) commit the samples taken so far, one transaction each.

    Times are ``time.monotonic()`` seconds, as the monitors'; in the record they are seconds since
    the Recorder was made (or since erg run started).
    """

    def __init__(self, path: Optional[Union[str, os.PathLike]] = None, power_monitor: Any = None) -> None:
        if path is None:
            env = os.environ.get("ERG_RECORD")
            if not env:
                raise ValueError("Recorder(path=None) needs ERG_RECORD (set by `erg run --record`)")
            self._w = _core.RecordWriter.open(env)
            self.path = env
        else:
            from . import discover

            self.path = os.fspath(path)
            self._w = _core.RecordWriter.create(self.path, bool(discover().simulated), time.monotonic_ns())
        self._pm = power_monitor
        self._t0 = time.monotonic() - self._w.seconds_now()
        # Per series: (device id, read the timeline since t, last sample time).
        self._series: List[Tuple[int, Any, float]] = []
        # GPU index -> the record device of its first domain, where its measured energy goes.
        self._gpu_ids: Dict[int, int] = {}
        if power_monitor is not None:
            for g in power_monitor.gpu_indices:
                for d in power_monitor.domains:
                    if power_monitor.sampled(g, d):
                        dev = self._w.add_device("gpu", g, d, _gpu_name(g))
                        self._gpu_ids.setdefault(g, dev)
                        self._series.append((dev, lambda s, g=g, d=d: power_monitor.timeline(g, d, start=s), 0.0))
            from . import discover

            for c in discover().cpus:
                for d in ("package", "dram"):
                    try:
                        power_monitor.cpu_timeline(c.index, d, start=0.0)
                    except Exception:  # not sampled (no DRAM domain, CPUs off)
                        continue
                    dev = self._w.add_device("cpu", c.index, d, "")
                    self._series.append(
                        (dev, lambda s, c=c.index, d=d: power_monitor.cpu_timeline(c, d, start=s), 0.0))

    def __enter__(self) -> "Recorder":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def seconds(self, monotonic_s: float) -> float:
        """A ``time.monotonic()`` time on the record's axis."""
        return monotonic_s - self._t0

    def flush(self) -> None:
        """Commits the power monitor's samples since the last flush (one transaction)."""
        for k, (dev, read, last) in enumerate(self._series):
            times, watts = read(last + _EPS if last else 0.0)
            if len(times) == 0:
                continue
            keep = times >= self._t0 if not last else times > last
            times, watts = times[keep], watts[keep]
            if len(times) == 0:
                continue
            self._w.add_samples(dev, times - self._t0, watts)
            self._series[k] = (dev, read, float(times[-1]))

    def add_window(self, name: str, start: float, end: float, energy_j: Optional[Dict[int, float]] = None) -> None:
        """A window from ``start`` to ``end`` (``time.monotonic()`` s); ``energy_j``: measured
        energy per record device id (others are integrated from the samples by the report)."""
        self._w.add_window(name, self.seconds(start), self.seconds(end), energy_j or {})

    def add_measurement(self, m: Any, end: Optional[float] = None) -> None:
        """An ``EnergyMonitor`` window just ended (``end``: when, default now) with its GPUs' measured
        energy on their recorded series."""
        end = time.monotonic() if end is None else end
        energies = {}
        for gpu, dev in self._gpu_ids.items():
            j = m.gpu_energy.get(gpu)
            if j is not None:
                energies[dev] = float(j)
        self._w.add_window(m.name, self.seconds(end - m.time), self.seconds(end), energies)

    def add_event(self, kind: str, data: Any, at: Optional[float] = None) -> None:
        """An event (``kind`` e.g. "power_limit.profile"; ``data`` JSON-serializable) at ``at``
        (``time.monotonic()`` s, default now)."""
        t = self.seconds(time.monotonic() if at is None else at)
        self._w.add_event(t, kind, json.dumps(data))

    def close(self) -> None:
        """Commits the remaining samples and marks the record complete."""
        if self._w is None:
            return
        self.flush()
        if self._pm is not None:
            self._w.set_meta("status", "complete")
        self._w = None


def _gpu_name(index: int) -> str:
    from . import discover

    for g in discover().gpus:
        if g.index == index:
            return str(g.name)
    return ""


def report(record: Union[str, os.PathLike, Recorder, Sequence[Union[str, os.PathLike]]],
           output: Optional[Union[str, os.PathLike]] = None, title: str = "") -> str:
    """The HTML page of a record (a path, or a Recorder, which is flushed first), as `erg report`
    makes it; a list of paths gives the comparison page (`erg report --compare`). Written to
    ``output`` when given; returned either way."""
    if isinstance(record, Recorder):
        record.flush()
        record = record.path
    if isinstance(record, (list, tuple)):
        html = _core.render_report_compare([os.fspath(p) for p in record], title)
    else:
        html = _core.render_report(os.fspath(record), title)
    if output is not None:
        with open(output, "w", encoding="utf-8") as f:
            f.write(html)
    return html
