"""Device abstraction (``zeus.device``): ``get_gpus()``, ``get_cpus()``, ``get_soc()`` and the GPU
exceptions, over erg's devices (NVML, RAPL, the simulated machine, ergd when unprivileged).

    from erg.compat.zeus.device import get_gpus     # was: from zeus.device import get_gpus
    gpus = get_gpus()
    gpus.set_power_management_limit(0, 250_000)     # mW
"""

from __future__ import annotations

from .cpu import get_cpus
from .gpu import common as _gpu_common
from .gpu import get_gpus
from .soc import get_soc

# The GPU exception classes, re-exported under the names gpu.common gives them.
_GPU_ERRORS = [name for name in _gpu_common.__all__ if name.startswith("ZeusGPU")]
globals().update({name: getattr(_gpu_common, name) for name in _GPU_ERRORS})

__all__ = ["get_gpus", "get_cpus", "get_soc", *_GPU_ERRORS]
