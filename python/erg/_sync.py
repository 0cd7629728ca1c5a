"""Synchronization with asynchronous frameworks before a window's counters are read."""

from __future__ import annotations

import importlib
from typing import Callable, Optional, Sequence, Union

from ._errors import UnavailableError

SyncWith = Union[str, Callable[[Sequence[int]], None], None]


def make_sync(sync_with: SyncWith, *, strict: bool = True) -> Optional[Callable[[Sequence[int]], None]]:
    """A function ``f(gpu_indices)`` that waits for queued work on those GPUs, or None.

    ``strict``: asking for "torch" without CUDA (or a framework that cannot be imported) is an
    UnavailableError at construction; not strict (the Zeus-compatible layer), it is a no-op, as
    in Zeus. Frameworks are imported here, lazily, never by ``import erg``.
    """
    if sync_with is None:
        return None
    if callable(sync_with):
        return sync_with
    if sync_with == "torch":
        return _torch_sync(strict)
    if sync_with == "jax":
        return _jax_sync(strict)
    if sync_with == "cupy":
        return _cupy_sync(strict)
    raise ValueError(f"sync_execution_with must be 'torch', 'jax', 'cupy' or a callable, not {sync_with!r}")


def _import(name: str, strict: bool):
    try:
        return importlib.import_module(name)
    except ImportError as e:
        if strict:
            raise UnavailableError(f"sync_execution_with={name.split('.')[0]!r}: {name} cannot be imported ({e})") from None
        return None


def _torch_sync(strict: bool):
    torch = _import("torch", strict)
    if torch is None:
        return None
    if not torch.cuda.is_available():
        if strict:
            raise UnavailableError(
                "sync_execution_with='torch' needs CUDA, but torch.cuda.is_available() is False; "
                "pass sync_execution_with=None to measure without synchronizing"
            )
        return None

    def sync(gpus: Sequence[int]) -> None:
        for i in gpus:
            torch.cuda.synchronize(i)

    return sync


def _jax_sync(strict: bool):
    jax = _import("jax", strict)
    if jax is None:
        return None

    def sync(gpus: Sequence[int]) -> None:
        (jax.device_put(0.0) + 0).block_until_ready()

    return sync


def _cupy_sync(strict: bool):
    cupy = _import("cupy", strict)
    if cupy is None:
        return None

    def sync(gpus: Sequence[int]) -> None:
        for i in gpus:
            with cupy.cuda.Device(i):
                cupy.cuda.Stream.null.synchronize()

    return sync
