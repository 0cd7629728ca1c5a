"""Training-loop callbacks (``zeus.callback``): ``Callback`` (every hook does nothing) and
``CallbackSet`` (calls each hook on every callback, in order)."""

from __future__ import annotations

from typing import List

__all__ = ["Callback", "CallbackSet"]


class Callback:
    """Base class of the hooks a training loop calls; override the ones needed."""

    def on_train_begin(self) -> None:
        """Before training."""

    def on_train_end(self) -> None:
        """After training."""

    def on_epoch_begin(self) -> None:
        """At the start of an epoch."""

    def on_epoch_end(self) -> None:
        """At the end of an epoch."""

    def on_step_begin(self) -> None:
        """At the start of a step."""

    def on_step_end(self) -> None:
        """At the end of a step."""

    def on_evaluate(self, metric: float) -> None:
        """After evaluation, with the metric."""

    def on_instruction_begin(self, name: str) -> None:
        """At the start of a named instruction (pipeline frequency optimizer)."""

    def on_instruction_end(self, name: str) -> None:
        """At the end of a named instruction."""


class CallbackSet(Callback):
    """Several callbacks as one."""

    def __init__(self, callbacks: List[Callback]) -> None:
        self.callbacks = callbacks

    def on_train_begin(self) -> None:
        for c in self.callbacks:
            c.on_train_begin()

    def on_train_end(self) -> None:
        for c in self.callbacks:
            c.on_train_end()

    def on_epoch_begin(self) -> None:
        for c in self.callbacks:
            c.on_epoch_begin()

    def on_epoch_end(self) -> None:
        for c in self.callbacks:
            c.on_epoch_end()

    def on_step_begin(self) -> None:
        for c in self.callbacks:
            c.on_step_begin()

    def on_step_end(self) -> None:
        for c in self.callbacks:
            c.on_step_end()

    def on_evaluate(self, metric: float) -> None:
        for c in self.callbacks:
            c.on_evaluate(metric)

    def on_instruction_begin(self, name: str) -> None:
        for c in self.callbacks:
            c.on_instruction_begin(name)

    def on_instruction_end(self, name: str) -> None:
        for c in self.callbacks:
            c.on_instruction_end(name)
