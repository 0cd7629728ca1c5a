"""PowerLimitOptimizer as a Hugging Face ``transformers.TrainerCallback``."""

from __future__ import annotations

from typing import Any

try:
    from transformers import TrainerCallback
except ImportError as e:  # noqa: F841
    _missing = e
    TrainerCallback = object  # type: ignore[assignment,misc]
else:
    _missing = None

from ._power_limit import PowerLimitOptimizer


class HFPowerLimitOptimizer(TrainerCallback):  # type: ignore[misc,valid-type]
    """``Trainer(callbacks=[HFPowerLimitOptimizer(monitor)])``: the optimizer's hooks on the
    Trainer's ``on_step_begin`` and ``on_epoch_end``. Same arguments as PowerLimitOptimizer.
    ImportError when transformers is not installed."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if _missing is not None:
            raise ImportError(
                "The transformers package is not installed. Please install it to use HFPowerLimitOptimizer."
            ) from _missing
        self.optimizer = PowerLimitOptimizer(*args, **kwargs)

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.optimizer.on_step_begin()

    def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.optimizer.on_epoch_end()
