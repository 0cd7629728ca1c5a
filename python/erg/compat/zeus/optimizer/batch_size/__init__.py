"""Zeus's batch-size optimizer client (``zeus.optimizer.batch_size``): ``client.BatchSizeOptimizer``,
the request models in ``common`` and the errors in ``exceptions``, over erg's native client
(``erg.optimizers.BatchSizeOptimizer``). The server is ``erg bso serve`` (or Zeus's)."""

from __future__ import annotations

from typing import List

__all__: List[str] = []
