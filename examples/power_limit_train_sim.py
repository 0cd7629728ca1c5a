"""A stand-in training loop for `erg optimize power-limit` on the simulated machine: each step is a
fixed amount of simulated GPU work (slower and lower-power under a lower limit, per the simulator's
calibrated model) and is reported on ERG_OPTIMIZER_FD. Simulated figures only.

    erg --simulate 1xV100 optimize power-limit --warmup-steps 5 --profile-steps 20 -- \\
        python3 examples/power_limit_train_sim.py
"""

import sys

import erg.optimizers
import erg.sim

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 200
machine = erg.sim.current()
if machine is None:
    sys.exit("run me on a simulated machine: erg --simulate 1xV100 optimize power-limit -- python3 " + sys.argv[0])
for _ in range(STEPS):
    erg.optimizers.report_step()
    machine.run_work(0, 0.05)  # 0.05 s of work at full clock on GPU 0
