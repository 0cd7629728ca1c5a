"""Optimizers for various knobs (``zeus.optimizer``): the power-limit one is in ``.power_limit``, the
batch-size optimizer's client in ``.batch_size.client``, the pipeline-frequency (Perseus) client in
``.pipeline_frequency``."""

from __future__ import annotations

from typing import List

__all__: List[str] = []
