"""A Zeus program: measure a training step at three GPU power limits.

Written against Zeus 0.16 (ml-energy/zeus); only its imports were changed to run on erg:

    from zeus.device import get_gpus                       -> from erg.compat.zeus.device import get_gpus
    from zeus.monitor import ZeusMonitor                   -> from erg.compat.zeus.monitor import ZeusMonitor
    from zeus.monitor.power import PowerMonitor, PowerDomain
                                     -> from erg.compat.zeus.monitor.power import PowerMonitor, PowerDomain

It sets each power limit with ``zeus.device`` (mW), measures the steps in a ``ZeusMonitor``
window per limit inside one window for the whole sweep (a CSV log row per window), samples
power with a ``PowerMonitor`` alongside, and puts the limits back.

Run it on a simulated machine (no GPU needed; the figures are simulated) with load on the GPUs;
``erg run``'s children attach to its machine, so the load and the program see the same GPUs
(the first window imports PyTorch to synchronize, as Zeus does, which takes a few seconds):

    PYTHONPATH=build/dev/python build/dev/cli/erg --simulate 2xA100 run -- sh -c \
      'build/dev/cli/erg simulate load --util 1 --seconds 10 & python3 examples/zeus_power_limit_sweep.py sweep.csv; wait'

``python/tests/zeus/test_example.py`` runs it on the test suite's simulated machine with the GPUs
busy and checks its output and log against what Zeus prints and returns.
"""

import sys
import time

from erg.compat.zeus.device import get_gpus
from erg.compat.zeus.monitor import ZeusMonitor
from erg.compat.zeus.monitor.power import PowerDomain, PowerMonitor

GPU_INDICES = [0, 1]
STEP_SECONDS = 0.6  # stands in for a few training steps


def train_steps() -> None:
    time.sleep(STEP_SECONDS)


def main(log_file: str) -> None:
    gpus = get_gpus()
    monitor = ZeusMonitor(gpu_indices=GPU_INDICES, log_file=log_file)
    power = PowerMonitor(gpu_indices=GPU_INDICES, update_period=0.05, power_domains=[PowerDomain.DEVICE_INSTANT])

    min_mw, max_mw = gpus.get_power_management_limit_constraints(GPU_INDICES[0])
    limits_mw = [max_mw, (min_mw + max_mw) // 2, min_mw]
    print(f"GPU {GPU_INDICES[0]}: {gpus.get_name(GPU_INDICES[0])}, power limit {min_mw} to {max_mw} mW")

    monitor.begin_window("sweep")
    start = monitor.measurement_states["sweep"].time  # time.time() at the window's start
    try:
        for limit_mw in limits_mw:
            for i in GPU_INDICES:
                gpus.set_power_management_limit(i, limit_mw)
            window = f"limit_{limit_mw // 1000}W"
            monitor.begin_window(window)
            train_steps()
            m = monitor.end_window(window)
            per_gpu = ", ".join(f"GPU{i} {e:.3f} J" for i, e in m.gpu_energy.items())
            print(f"{window}: {m.time:.3f} s, {m.total_energy:.3f} J ({per_gpu})")
        sweep = monitor.end_window("sweep")
    finally:
        for i in GPU_INDICES:
            gpus.reset_power_management_limit(i)
    print(f"sweep: {sweep.time:.3f} s, {sweep.total_energy:.3f} J")

    sampled = power.get_energy(start, start + sweep.time)  # the same span, integrated from samples
    print("power monitor: " + ", ".join(f"GPU{i} {e:.3f} J" for i, e in sampled.items()))
    now = power.get_power()
    print("power now: " + ", ".join(f"GPU{i} {w:.1f} W" for i, w in now.items()))
    power.stop()
    print(f"limits restored: {[gpus.get_power_management_limit(i) for i in GPU_INDICES]} mW")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "zeus_power_limit_sweep.csv")
