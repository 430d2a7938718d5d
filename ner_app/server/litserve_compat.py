"""Every reach of ``serve`` into LitServe's internals, in one place, for the versions pyproject allows.

LitServe 0.2 offers no public hook for what ``serve`` needs: a line once the HTTP processes listen, its own
watch over the model worker, a stop from a signal handler, and a batching loop that waits without polling. So
``CompatServer`` and the names below use private parts of LitServe (``_start_server``, ``_shutdown_event``,
``_monitor_workers``, the loops' ``_SENTINEL_VALUE`` and the layout of a queued request). ``tests/serve/test_litserve_compat.py`` checks each of
them against the installed LitServe and that its version is in ``SUPPORTED``; a LitServe outside it needs
this module, and only this module, looked at again.
"""

from __future__ import annotations

import contextlib
import threading
import time
from queue import Empty
from typing import Any

import litserve as ls  # type: ignore[import-untyped]
from litserve.loops.base import _SENTINEL_VALUE  # type: ignore[import-untyped]
from litserve.loops.simple_loops import BatchedLoop  # type: ignore[import-untyped]
from litserve.utils import WorkerSetupStatus  # type: ignore[import-untyped]

SUPPORTED = ">=0.2.19,<0.3"  # pyproject's serve extra says the same
SENTINEL = _SENTINEL_VALUE  # what LitServe puts into a request queue to stop a worker's loop

__all__ = ["SENTINEL", "SUPPORTED", "BatchedLoop", "CollectingLoop", "CompatServer", "WorkerSetupStatus"]


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


class CollectingLoop(BatchedLoop):
    """LitServe's batched loop, waiting without polling and only for requests that are due.

    The clients of the last batch are likely to come back, and so are those whose requests queued up while
    it ran: the loop takes what is queued, then waits (at most ``batch_timeout``) only until the batch is
    that large. So a lone client never waits, N busy clients are tagged N at a time, and two halves of them
    merge again. (LitServe's own loop asks the queue every millisecond, or without pause when the timeout is
    0: a busy core on an idle server; and it waits the whole timeout for every batch.)"""

    last = 1  # requests of the last batch (one loop per worker process)

    def get_batch_requests(self, lit_api: Any, request_queue: Any, transport: Any) -> tuple[list, list]:
        items: list[Any] = []
        with contextlib.suppress(Empty):
            while len(items) < lit_api.max_batch_size:
                items.append(request_queue.get_nowait())
        expected = min(len(items) + self.last, lit_api.max_batch_size)
        if not items:
            try:
                items.append(request_queue.get(timeout=1.0))
            except Empty:
                return [], []
        deadline = time.monotonic() + lit_api.batch_timeout
        while len(items) < expected and SENTINEL not in items:
            try:
                items.append(request_queue.get(timeout=max(deadline - time.monotonic(), 0.0)))
            except Empty:
                break
        self.last = len(items)
        batch, late = [], []
        limit = lit_api.request_timeout
        for item in items:
            if item == SENTINEL:
                continue
            queue_id, uid, timestamp, payload = item
            if limit not in (None, False, -1) and time.monotonic() - timestamp > limit:
                late.append((queue_id, uid))  # answered 504 by the loop
            else:
                batch.append((queue_id, uid, payload))
        return batch, late
