"""Zeus's helpers (``zeus.utils``): ``framework``, ``metric``, ``multiprocessing``, ``env``,
``lr_scaler``, ``logging``, ``async_utils`` and ``testing`` (``ReplayZeusMonitor``)."""

__all__: list = []
