"""What ``serve`` runs (``ServeSpec``): the export, where it listens, how it batches and its limits. No
LitServe and no torch here: ``serve --help`` shows these defaults without importing the server."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class ServeSpec:
    """What ``serve`` runs: the export, where it listens, and how it batches."""

    model: Path | None  # None: the shipped tagger (resolved in the worker: its module imports torch)
    host: str = LOOPBACK
    port: int = 8000
    device: str = "cpu"
    threads: int | None = None  # torch CPU threads of the worker (None: torch's default)
    batch_size: int = 64  # sentences per forward pass
    max_batch_size: int = 16  # requests tagged together
    batch_timeout: float = 0.02  # at most, the worker waits this long for the requests of a batch
    timeout: float = 30.0  # seconds a request may wait in the queue before a 504
    drain_timeout: float = 30.0  # after SIGTERM, seconds the requests in flight have to finish
    header_timeout: float = 10.0  # seconds a request's head may take (from the connection or the last answer)
    body_timeout: float = 30.0  # seconds a /predict body may take, once its head is in
    keep_alive_timeout: float = 5.0  # seconds an idle connection stays open between requests (uvicorn's)
    max_connections: int = 256  # open at once; then a request gets uvicorn's 503 (limit_concurrency)
    log_level: str = "warning"
