"""Imported by ``predict --workers``'s fork server before it forks any worker (``predict/fork_server.py``): torch,
the predictor, and the export that ``MODEL_ENV`` names, loaded once with one torch thread. For an ONNX folder
only the ONNX predictor is imported (no torch): each worker opens its own onnxruntime sessions.

Every worker is a fork of that server, so it starts with the model already loaded and shares its weights
with the others, copy-on-write (inference never writes them), instead of loading the export itself. Nothing
here runs a parallel region (one thread), so the server stays safe to fork: each worker sets its own thread
count and starts its own pool. A load that fails leaves ``loaded`` empty: the worker then loads the export
itself and reports the user's mistake in one line, as before; an exception here would end the fork server.

Ctrl-C reaches the whole process group: the main process reports it in one line and ends the workers, so the
server and the workers ignore SIGINT (set here, before the imports, and inherited by every fork), rather than
each printing a traceback of wherever the signal found it.
"""

from __future__ import annotations

import os
import signal
from typing import Any

signal.signal(signal.SIGINT, signal.SIG_IGN)

from ner_app.predict.fork_server import (  # noqa: E402 (after SIGINT is ignored)
    MODEL_ENV,
    load_predictor,
    request_model,
)
from ner_app.predict.loading import model_kind  # noqa: E402

# (the request it was loaded for, the predictor): a worker uses it only when its own request is the same
loaded: tuple[str, Any] | None = None


def _load(request: str) -> tuple[str, Any] | None:
    if model_kind(request_model(request)) == "onnx":
        # each worker opens its own onnxruntime sessions with its threads: no session's threads are forked
        import ner_app.onnx.predictor  # noqa: F401

        return None
    import torch

    try:
        torch.set_num_threads(1)
        return request, load_predictor(request)
    except Exception:  # any failure: the worker loads the export again and says what is wrong
        return None


if os.environ.get(MODEL_ENV):
    loaded = _load(os.environ[MODEL_ENV])
else:  # the torch and predictor imports, paid once for all workers
    import ner_app.predict.predictor  # noqa: F401
