"""Data-parallel training on a simulated heterogeneous machine with a plan from `erg hetero plan`:
one thread per rank (each with its own GPU), a barrier after every step. A step of b samples is
OVERHEAD + b / SAMPLES_PER_S[gpu type] units of simulated work (1 unit = 1 s of the GPU fully busy
at its highest clock), so its time depends on the share, the SKU and the power limit. The same
step model as `erg simulate load --batch-size`, so profiles made with it (docs/hetero.md) fit.
Simulated figures only.

    erg --simulate 1xA10,1xT4 run -- python3 examples/hetero_train_sim.py plan.json [heuristic|baseline] [steps]
"""

import sys
import threading
import time

import erg.hetero
import erg.sim

SAMPLES_PER_S = {"A10": 1200.0, "T4": 450.0}
OVERHEAD = 0.005

plan = erg.hetero.load_plan(sys.argv[1])
method = sys.argv[2] if len(sys.argv) > 2 else "heuristic"
steps = int(sys.argv[3]) if len(sys.argv) > 3 else 50
machine = erg.sim.current()
if machine is None:
    sys.exit("run me on a simulated machine: erg --simulate 1xA10,1xT4 run -- python3 " + sys.argv[0] + " plan.json")
ranks = len(plan["plans"][method]["gpus"])
barrier = threading.Barrier(ranks)
finish = [[] for _ in range(ranks)]
mark = {}


def start_measuring():
    mark["energy"] = [machine.true_energy(g) for g in range(ranks)]
    mark["time"] = time.monotonic()


start = threading.Barrier(ranks, action=start_measuring)


def rank_main(rank):
    with erg.hetero.RankPlan(plan, rank=rank, gpu_index=rank, method=method) as part:
        work = OVERHEAD + part.batch_size / SAMPLES_PER_S[part.gpu_type]
        time.sleep(1.0)  # the new limit settles
        start.wait()
        for _ in range(steps):
            t0 = time.monotonic()
            machine.run_work(rank, work)  # idles at the barrier afterwards
            finish[rank].append(time.monotonic() - t0)
            barrier.wait()


threads = [threading.Thread(target=rank_main, args=(r,)) for r in range(ranks)]
for t in threads:
    t.start()
for t in threads:
    t.join()
elapsed = time.monotonic() - mark["time"]
energy = sum(machine.true_energy(g) - mark["energy"][g] for g in range(ranks))
for r in range(ranks):
    part = plan["plans"][method]["gpus"][r]
    mean = sum(finish[r]) / len(finish[r])
    print(f"rank {r} ({part['gpu_type']}): batch {part['batch_size']} @ {part['power_limit_w']:g} W, "
          f"mean compute {mean:.4f} s/step (predicted {part['step_time_s']:.4f} s)")
slowest = max(sum(f) / len(f) for f in finish)
fastest = min(sum(f) / len(f) for f in finish)
print(f"{method}: {steps} steps, finish spread {100 * (slowest - fastest) / slowest:.1f} %, "
      f"{elapsed / steps:.4f} s/step, {energy / steps:.2f} J/step (simulated, physical energy)")
