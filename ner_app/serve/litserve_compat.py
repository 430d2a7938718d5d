"""Every reach of ``serve`` into LitServe's internals, in one place, for the versions pyproject allows.

LitServe 0.2 offers no public hook for what ``serve`` needs: a line once the HTTP processes listen, its own
watch over the model worker, a stop from a signal handler, and a batching loop that waits without polling. So
``CompatServer`` and the names below use private parts of LitServe (``_start_server``, ``_shutdown_event``,
``_monitor_workers``, the loops' ``_SENTINEL_VALUE``). ``tests/serve/test_litserve_compat.py`` checks each of
them against the installed LitServe and that its version is in ``SUPPORTED``; a LitServe outside it needs
this module, and only this module, looked at again.
"""

from __future__ import annotations

import threading
from typing import Any

import litserve as ls  # type: ignore[import-untyped]
from litserve.loops.base import _SENTINEL_VALUE  # type: ignore[import-untyped]
from litserve.loops.simple_loops import BatchedLoop  # type: ignore[import-untyped]
from litserve.utils import WorkerSetupStatus  # type: ignore[import-untyped]

SUPPORTED = ">=0.2.19,<0.3"  # pyproject's serve extra says the same
SENTINEL = _SENTINEL_VALUE  # what LitServe puts into a request queue to stop a worker's loop

__all__ = ["SENTINEL", "SUPPORTED", "BatchedLoop", "CompatServer", "WorkerSetupStatus"]


class CompatServer(ls.LitServer):
    """``LitServer`` with the hooks ``serve`` needs: ``on_listening`` once the HTTP processes run, ``request_stop``
    from anywhere, and no LitServe watch over the inference workers (whoever subclasses this watches them)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._monitor_workers = False  # run() starts LitServe's own watch only when this is set

    def on_listening(self, workers: dict[int, Any]) -> None:
        """Called in the supervisor once the HTTP processes (``workers``) are started."""

    def request_stop(self) -> None:
        """Let ``run()`` go on to its shutdown; callable from a signal handler (the event lives in LitServe's
        manager process, a socket away, so it is set from a thread)."""
        event = self._shutdown_event
        if event is not None:
            threading.Thread(target=event.set, daemon=True).start()

    def _start_server(self, *args: Any, **kwargs: Any) -> Any:
        workers = super()._start_server(*args, **kwargs)
        self.on_listening(workers)
        return workers
