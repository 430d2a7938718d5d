"""The fork server of ``predict --workers`` (``predict/workers.py``): started with the export to load, so that
it loads it once (``worker_preload.py``) and every worker forked from it shares the loaded weights; ended with
the pool. Nothing here imports torch: the main process only starts and stops the server."""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import multiprocessing.forkserver
import os
import signal
from pathlib import Path
from typing import Any

PRELOAD = ["ner_app.predict.worker_preload"]  # what the fork server imports (and loads) once for all workers
MODEL_ENV = "NER_APP_WORKER_MODEL"  # the export the fork server loads (a model_request)


def model_request(model: str, device: str, batch_size: int | None, max_tokens: int | None) -> str:
    """What the fork server loads, as a string that the workers compare with their own (``batch_size`` None:
    the predictor's default, so that the main process need not import the predictor, and torch, to know it)."""
    return json.dumps([str(Path(model).resolve()), device, batch_size, max_tokens])


def request_model(request: str) -> str:
    """The model folder of a ``model_request``."""
    return str(json.loads(request)[0])


def load_predictor(request: str, threads: int | None = None) -> Any:
    """The predictor of a ``model_request`` (``predict/loading.py``: torch is imported here, in the fork server
    or a worker, and only for a torch export; ``threads``: an ONNX folder's onnxruntime threads)."""
    from ner_app.predict.loading import load_predictor as load
    from ner_app.text.batching import PREDICT_BATCH_SIZE

    model, device, batch_size, max_tokens = json.loads(request)
    return load(model, device, PREDICT_BATCH_SIZE if batch_size is None else batch_size, max_tokens, threads)


def start_fork_server(request: str) -> None:
    """Start the fork server with ``MODEL_ENV`` set to ``request`` in its environment, so that it loads that
    export before it forks a worker. A server already running (another user of ``forkserver`` in this
    process) is kept: the workers load the export themselves when it holds another."""
    multiprocessing.get_context("forkserver").set_forkserver_preload(PRELOAD)
    previous = os.environ.get(MODEL_ENV)
    os.environ[MODEL_ENV] = request
    try:
        multiprocessing.forkserver.ensure_running()
    finally:
        if previous is None:
            del os.environ[MODEL_ENV]
        else:
            os.environ[MODEL_ENV] = previous


def stop_fork_server() -> None:
    """End the fork server at once, even while it is still loading: a worker start still queued there would
    otherwise run after the pool is gone (Ctrl-C during start-up) and print a traceback, and a long-lived
    process would keep the model in memory. The next pool starts a new server. multiprocessing has no public
    way to stop it; without these internals the server ends with this process, as it did before."""
    server = getattr(multiprocessing.forkserver, "_forkserver", None)
    pid, stop = getattr(server, "_forkserver_pid", None), getattr(server, "_stop", None)
    if pid is None or stop is None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    stop()  # closes its end of the "alive" pipe, reaps the server, removes its socket
