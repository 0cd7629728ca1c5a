"""One rank of a simulated pipeline-parallel job, for test_perseus_e2e.py (run as a script).

    python3 _perseus_rank.py RANK WORLD SERVER_URL JOB_ID_FILE OUT_FILE STEPS [--hang-at STEP] [--no-guard]
                             [--work UNITS]

Rank r is pipeline stage r on GPU r of the simulated machine (ERG_SIM_STATE); its GPU setters go
through ergd when ERG_DAEMON_SOCK is set. Each instruction runs simulated work on the GPU while
the optimizer holds its clock; during it the rank reads the GPU's locked clocks from the
simulated device and records them. After every step it rewrites OUT_FILE (JSON) with what it saw
and the results it posted. With --hang-at S it stops inside the first instruction of step S,
clocks locked, and waits to be killed; --no-guard turns the clock guardian off; --work sets the
forward's simulator work (default WORK; the backward's is twice it), so stages can be imbalanced. A
step whose schedule the server refuses (the job was evicted) ends the rank with exit status 3; a
result the server refuses (e.g. 422 from the online scheduler) with exit status 4, its message in
OUT_FILE's "post_error".
"""

import json
import os
import sys
import time

import erg
import erg.sim
from erg.optimizers import PipelineFrequencyOptimizer

WORK = 0.02  # simulator work units per forward (backward: twice); 1 = 1 s of a busy GPU at 1410 MHz


def main() -> int:
    rank, world, url, id_file, out_file, steps = sys.argv[1:7]
    rank, world, steps = int(rank), int(world), int(steps)
    extra = sys.argv[7:]
    hang_at = int(extra[extra.index("--hang-at") + 1]) if "--hang-at" in extra else None
    guard = False if "--no-guard" in extra else None
    work = float(extra[extra.index("--work") + 1]) if "--work" in extra else WORK
    machine = erg.sim.current()

    def share(mine):
        if mine is not None:  # rank 0: publish atomically
            tmp = id_file + ".tmp"
            with open(tmp, "w") as f:
                f.write(mine)
            os.replace(tmp, id_file)
            return mine
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if os.path.exists(id_file):
                with open(id_file) as f:
                    return f.read()
            time.sleep(0.02)
        raise TimeoutError("rank 0 published no job id within 30 s")

    seen = {"rank": rank, "pid": os.getpid(), "locked": [], "results": [], "evicted": None, "post_error": None}

    def save():
        tmp = out_file + ".tmp"
        with open(tmp, "w") as f:
            json.dump(seen, f)
        os.replace(tmp, out_file)

    opt = PipelineFrequencyOptimizer(rank, 0, rank, 0, rank, 1, world, 1, world, url, f"pid{os.getpid()}",
                                     share_job_id=share, read_timeout_s=60, guard_clocks=guard)
    seen["job_id"] = opt.job_id
    seen["available"] = opt.available_frequencies
    save()
    for step in range(steps):
        try:
            opt.on_step_begin()
        except erg.DeviceTimeoutError as e:  # the job was evicted: a rank died
            seen["evicted"] = str(e)
            save()
            opt.close()
            return 3
        for k, (name, mhz) in enumerate(opt.schedule):
            opt.on_instruction_begin(name)
            clocks = machine.locked_clocks(rank)
            seen["locked"].append([step, name, mhz, list(clocks["sm"]), list(clocks["memory"])])
            if step == hang_at:
                save()
                print("hanging", flush=True)
                while True:
                    time.sleep(1)
            machine.run_work(rank, work if name == "forward" else 2 * work)
            opt.on_instruction_end(name)
        try:
            opt.on_step_end()
        except ValueError as e:  # the server refused the result (422/400)
            seen["post_error"] = str(e)
            seen["instructions"] = opt.instructions
            save()
            opt.close()
            return 4
        seen["results"] = opt.results
        save()
        print(f"step {step}", flush=True)
    opt.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
