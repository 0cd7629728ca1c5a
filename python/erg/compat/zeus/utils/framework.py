"""Framework helpers (``zeus.utils.framework``): which of PyTorch, JAX and CuPy can be used,
``sync_execution`` (wait for queued GPU work), ``all_reduce`` and the distributed rank helpers.

Frameworks are imported on first use, never by ``import erg``. As in Zeus, synchronizing with a
framework that cannot do it is a RuntimeError (here erg's UnavailableError, a RuntimeError):
PyTorch without CUDA, or a framework that cannot be imported. One difference: on erg's simulated
machine (``ERG_SIMULATE``) the GPUs are not CUDA devices, so a framework that imports but has
no CUDA synchronizes nothing instead of raising (there is no GPU work to wait for).
"""

from __future__ import annotations

import functools
import logging
import types
from typing import Dict, List, Literal, Tuple, Union

from erg._errors import UnavailableError

__all__ = [
    "torch_is_available", "jax_is_available", "cupy_is_available", "sync_execution", "all_reduce",
    "is_distributed", "get_rank", "get_world_size",
]

logger = logging.getLogger("zeus.utils.framework")
MODULE_CACHE: Dict[str, types.ModuleType] = {}


_SIM_NO_CUDA: Dict[str, Tuple[object, bool]] = {}  # framework → (erg's inventory, answer)


def _no_cuda_on_simulated_machine(framework: str) -> bool:
    """True when erg's devices are simulated and ``framework`` imports but sees no CUDA GPU
    (worked out once per framework and device inventory: it is asked at every window edge)."""
    from erg import _env

    inventory = _env.inventory()
    cached = _SIM_NO_CUDA.get(framework)
    if cached is not None and cached[0] is inventory:
        return cached[1]
    answer = inventory.simulated and _imports_without_cuda(framework)
    _SIM_NO_CUDA[framework] = (inventory, answer)
    return answer


def _imports_without_cuda(framework: str) -> bool:
    try:
        if framework == "torch":
            import torch

            return not torch.cuda.is_available()
        if framework == "jax":
            import jax  # type: ignore[import-not-found]

            try:
                return not jax.devices("gpu")
            except RuntimeError:
                return True
    except ImportError:
        return False  # not importable: the RuntimeError below, as anywhere
    return False


@functools.lru_cache(maxsize=1)
def torch_is_available(ensure_available: bool = False, ensure_cuda: bool = True) -> bool:
    """Whether PyTorch can be imported. RuntimeError if ``ensure_cuda`` and it has no CUDA, or
    if ``ensure_available`` and it cannot be imported."""
    try:
        import torch

        cuda_available = torch.cuda.is_available()
        if ensure_cuda and not cuda_available:
            raise UnavailableError("PyTorch is available but does not have CUDA support.")
        MODULE_CACHE["torch"] = torch
        logger.info("PyTorch %s CUDA support is available.", "with" if cuda_available else "without")
        return True
    except ImportError as e:
        logger.info("PyTorch is not available.")
        if ensure_available:
            raise UnavailableError("Failed to import Pytorch") from e
        return False


@functools.lru_cache(maxsize=1)
def jax_is_available(ensure_available: bool = False, ensure_cuda: bool = True) -> bool:
    """Whether JAX can be imported. RuntimeError if ``ensure_cuda`` and it has no GPU, or if
    ``ensure_available`` and it cannot be imported."""
    try:
        import jax  # type: ignore[import-not-found]

        try:
            cuda_available = bool(jax.devices("gpu"))
        except RuntimeError:
            cuda_available = False
        if ensure_cuda and not cuda_available:
            raise UnavailableError("JAX is available but does not have CUDA support.")
        MODULE_CACHE["jax"] = jax
        logger.info("JAX %s CUDA support is available.", "with" if cuda_available else "without")
        return True
    except ImportError as e:
        logger.info("JAX is not available")
        if ensure_available:
            raise UnavailableError("Failed to import JAX") from e
        return False


@functools.lru_cache(maxsize=1)
def cupy_is_available(ensure_available: bool = False) -> bool:
    """Whether CuPy can be imported. RuntimeError if ``ensure_available`` and it cannot."""
    try:
        import cupy  # type: ignore[import-not-found]

        MODULE_CACHE["cupy"] = cupy
        logger.info("CuPy is available.")
        return True
    except ImportError as e:
        logger.info("CuPy is not available.")
        if ensure_available:
            raise UnavailableError("Failed to import CuPy") from e
        return False


def sync_execution(gpu_devices: List[int], sync_with: Literal["torch", "jax", "cupy"] = "torch") -> None:
    """Blocks until the work queued on ``gpu_devices`` is done: ``torch.cuda.synchronize`` on each
    (torch); a tiny computation on each GPU and CPU 0, waited for (jax); each device's
    ``synchronize`` (cupy). RuntimeError when the framework cannot do it ("No framework is
    available." for any other ``sync_with``)."""
    if sync_with in ("torch", "jax") and _no_cuda_on_simulated_machine(sync_with):
        logger.debug("Simulated GPUs: nothing to synchronize with %s.", sync_with)
        return
    if sync_with == "torch" and torch_is_available(ensure_available=True):
        torch = MODULE_CACHE["torch"]
        for device in gpu_devices:
            torch.cuda.synchronize(device)
        return
    if sync_with == "jax" and jax_is_available(ensure_available=True):
        jax = MODULE_CACHE["jax"]
        futures = [jax.device_put(0.0, device=jax.devices("gpu")[d]) + 0 for d in gpu_devices]
        futures.append(jax.device_put(0.0, device=jax.devices("cpu")[0]) + 0)
        jax.block_until_ready(futures)
        return
    if sync_with == "cupy" and cupy_is_available(ensure_available=True):
        cupy = MODULE_CACHE["cupy"]
        for device in gpu_devices:
            cupy.cuda.Device(device).synchronize()
        return
    raise UnavailableError("No framework is available.")


def all_reduce(object: Union[List[int], List[float]], operation: Literal["sum", "max"]) -> Union[List[int], List[float]]:
    """Reduces ``object`` over all ranks (``torch.distributed`` when initialized); the object
    itself when not distributed. ValueError for another operation."""
    if torch_is_available(ensure_cuda=False):
        torch = MODULE_CACHE["torch"]
        if not torch.distributed.is_available() or not torch.distributed.is_initialized():
            return object
        if operation == "sum":
            op = torch.distributed.ReduceOp.SUM
        elif operation == "max":
            op = torch.distributed.ReduceOp.MAX
        else:
            raise ValueError(f"all_reduce unsupported operation: {operation}")
        tensor = torch.tensor(object, dtype=torch.float64)
        if torch.cuda.is_available():
            tensor = tensor.cuda()
        torch.distributed.all_reduce(tensor, op=op)
        return tensor.cpu().tolist()
    if jax_is_available(ensure_cuda=False):
        jax = MODULE_CACHE["jax"]
        if jax.device_count() == 1:
            return object
        raise NotImplementedError("JAX distributed is not supported yet.")
    raise UnavailableError("No framework is available.")


def is_distributed() -> bool:
    """Whether this run is distributed (``torch.distributed`` initialized, or several JAX devices)."""
    if torch_is_available(ensure_cuda=False):
        torch = MODULE_CACHE["torch"]
        return bool(torch.distributed.is_available() and torch.distributed.is_initialized())
    if jax_is_available(ensure_cuda=False):
        return MODULE_CACHE["jax"].device_count() > 1
    raise UnavailableError("No framework is available.")


def get_rank() -> int:
    """This process's rank (0 when not distributed)."""
    if torch_is_available(ensure_cuda=False):
        torch = MODULE_CACHE["torch"]
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            return int(torch.distributed.get_rank())
        return 0
    if jax_is_available(ensure_cuda=False):
        return int(MODULE_CACHE["jax"].process_index())
    raise UnavailableError("No framework is available.")


def get_world_size() -> int:
    """The number of ranks (1 when not distributed)."""
    if torch_is_available(ensure_cuda=False):
        torch = MODULE_CACHE["torch"]
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            return int(torch.distributed.get_world_size())
        return 1
    if jax_is_available(ensure_cuda=False):
        return int(MODULE_CACHE["jax"].process_count())
    raise UnavailableError("No framework is available.")

