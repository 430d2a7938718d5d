"""``serve``: an exported tagger behind HTTP with LitServe, loaded once, requests batched (docs/serving.md).

Processes: this one (LitServe's supervisor; it never imports torch), one HTTP process (uvicorn; it checks
every body, ``http_guard.py``) and one inference worker (it loads the export once and tags). The worker takes
the requests that are queued and those due back (``CollectingLoop``), at most ``max_batch_size``, and tags
the texts of all of them in one ``Predictor.predict_texts`` call, so sentences are batched across requests.
SIGTERM stops the HTTP process first (it stops accepting and answers what is in flight), then the worker;
the exit code is 0. If the worker dies, the supervisor sees it at once (``_watch_worker``), the requests
waiting for it are answered 503 (``http_guard.py``), and the server stops with one line and exit code 1.
Slow clients are timed out and open connections capped (``ServeSpec``). LitServe's internals are reached
only through ``litserve_compat.py``.
"""

from __future__ import annotations

import ipaddress
import logging
import multiprocessing
import multiprocessing.connection
import os
import signal
import socket
import sys
import threading
import time
from types import FrameType
from typing import Any

import litserve as ls  # type: ignore[import-untyped]
from starlette.exceptions import HTTPException

from ner_app.errors import NerAppError
from ner_app.server.http_guard import PredictGuard, header_deadline, http_error
from ner_app.server.litserve_compat import CollectingLoop, CompatServer, WorkerSetupStatus
from ner_app.server.request_body import request_options
from ner_app.server.serve_spec import LOOPBACK, ServeSpec

ALL_INTERFACES = ("0.0.0.0", "::")  # what LitServe binds besides loopback


def bind_address(host: str, allow_remote: bool) -> str:
    """The address to listen on: loopback, or all interfaces only with ``allow_remote``."""
    if host in (LOOPBACK, "localhost"):
        return LOOPBACK
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if loopback:
        raise NerAppError(f"--host {host}: LitServe listens on 127.0.0.1 for loopback; use --host 127.0.0.1")
    if not allow_remote:
        raise NerAppError(
            f"--host {host} is not a loopback address; the server has no authentication and no TLS, so it "
            "answers only this machine unless --allow-remote is given"
        )
    if host not in ALL_INTERFACES:
        raise NerAppError(
            f"--host {host}: LitServe listens on 127.0.0.1, 0.0.0.0 (all IPv4 interfaces) or :: (all) only"
        )
    return host


def check_port(host: str, port: int) -> None:
    """Refuse a port this process cannot listen on, before the model is loaded (uvicorn would exit 1)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind((host, port))
        except OSError as err:
            raise NerAppError(
                f"--port {port}: cannot listen on {host}:{port} ({err.strerror}); choose another port"
            ) from None


class TaggerAPI(ls.LitAPI):
    """The inference worker's side: load the export once, tag the texts of a batch of requests together."""

    def __init__(self, spec: ServeSpec, errors: Any) -> None:
        super().__init__(
            max_batch_size=spec.max_batch_size, batch_timeout=spec.batch_timeout, loop=CollectingLoop()
        )
        self.serve_spec, self.errors = spec, errors
        self.predictor: Any = None  # a Predictor once setup ran

    def setup(self, device: str) -> None:
        from ner_app.predict.loading import load_predictor  # the model's code only in the worker
        from ner_app.predict.shipped import SHIPPED_MODEL, shipped
        from ner_app.text.reliability import note_uncalibrated

        ls.configure_logging(self.serve_spec.log_level, stream=sys.stderr)
        try:
            model = self.serve_spec.model or shipped(SHIPPED_MODEL, "CoNLL-2003 tagger (--model)")
            # an ONNX folder runs on the CPU with no torch; LitServe names the worker's device "cpu" then too
            self.predictor = load_predictor(
                model, device, self.serve_spec.batch_size, threads=self.serve_spec.threads
            )
            note_uncalibrated(self.predictor.calibrated, str(model))
        except NerAppError as err:
            self.errors.put(str(err))  # the supervisor prints it as the one error line
            logging.getLogger("litserve.loops.loops").disabled = True  # and no traceback besides
            raise
        list(self.predictor.predict_texts(["Warm up the predict loop ."]))  # the first request is not slower

    # No annotation: LitServe makes the parameter's annotation the route's request type (a dict would be
    # read from the query string); the request is the parsed JSON body, checked by request_body.py.
    def decode_request(self, request):
        return request["texts"], request_options(request)

    def batch(self, inputs: list[tuple[list[str], dict[str, Any]]]) -> list[tuple[list[str], dict[str, Any]]]:
        return inputs

    def predict(self, batch: list[tuple[list[str], dict[str, Any]]]) -> list[list[dict[str, Any]]]:
        """The texts of the requests that ask for the same options are tagged together."""
        from ner_app.text.readings import ReadingOptions

        assert self.predictor is not None
        out: list[list[dict[str, Any]]] = [[] for _ in batch]
        groups: dict[tuple[tuple[str, Any], ...], list[int]] = {}
        for n, (_, options) in enumerate(batch):
            groups.setdefault(tuple(sorted(options.items())), []).append(n)
        for key, members in groups.items():
            texts = [text for n in members for text in batch[n][0]]
            found = list(self.predictor.predict_texts(texts, options=ReadingOptions(**dict(key))))
            start = 0
            for n in members:
                out[n] = found[start : start + len(batch[n][0])]
                start += len(batch[n][0])
        return out

    def unbatch(self, output: list[list[dict[str, Any]]]) -> list[list[dict[str, Any]]]:
        return output

    def encode_response(self, output: list[dict[str, Any]]) -> dict[str, Any]:
        return {"results": output}


class _StoppedEarly(Exception):
    """SIGTERM while the model was loading."""


class TaggerServer(CompatServer):
    """LitServer that reports a worker's failed start in one line, stops on SIGTERM without dropping
    requests in flight, and on the worker's death answers the requests waiting for it 503 and stops."""

    def __init__(self, spec: ServeSpec) -> None:
        self.serve_spec, self.stopping = spec, False  # stopping: SIGTERM or Ctrl-C asked for it
        self.errors = multiprocessing.get_context("spawn").SimpleQueue()  # the worker's load error, if any
        self.worker_exit: int | None = None  # the exit code of a worker that died under the running server
        # a byte in this pipe tells the HTTP processes (forked: they inherit it) that the worker is dead
        self.gone_read, self.gone_write = os.pipe()
        guard = {"path": "/predict", "body_timeout": spec.body_timeout, "worker_gone": self.gone_read}
        accelerator = "cuda" if spec.device == "cuda" else "cpu"
        super().__init__(
            TaggerAPI(spec, self.errors),
            accelerator=accelerator,
            devices=1,
            timeout=spec.timeout,
            middlewares=[(PredictGuard, guard)],
            disable_openapi_url=True,
        )
        self.app.add_exception_handler(HTTPException, http_error)
        self.uvicorn_graceful_timeout = spec.drain_timeout

    def uvicorn_options(self) -> dict[str, Any]:
        """What uvicorn is given besides the address: the slow-client limits of the spec."""
        spec = self.serve_spec
        return {
            "http": header_deadline(spec.header_timeout),
            "timeout_keep_alive": spec.keep_alive_timeout,
            "limit_concurrency": spec.max_connections,
        }

    def _watch_worker(self) -> None:
        """In the supervisor: wait (without polling) until a model worker ends; unless the server is stopping
        anyway, tell the HTTP processes (they answer 503) and stop the server."""
        ended = multiprocessing.connection.wait([worker.sentinel for worker in self.inference_workers])
        if self.stopping:
            return
        os.write(self.gone_write, b"x")
        dead = next(w for w in self.inference_workers if w.sentinel in ended)
        dead.join(timeout=5)  # its pipes close a moment before its exit code is there to read
        self.worker_exit = dead.exitcode
        self.request_stop()

    def verify_worker_status(self) -> None:
        """Wait until the worker has loaded the export; its error (or its death) is one ``NerAppError``."""
        while True:
            failed = not self.errors.empty() or any(
                v == WorkerSetupStatus.ERROR for v in self.workers_setup_status.values()
            )
            if failed or self.stopping or not all(w.is_alive() for w in self.inference_workers):
                for worker in self.inference_workers:
                    worker.terminate()
                    worker.join(timeout=10)
                if self.stopping and not failed:
                    raise _StoppedEarly
                message = self.errors.get() if not self.errors.empty() else None
                raise NerAppError(message or "the model worker failed to start (its error is above)")
            if any(v == WorkerSetupStatus.READY for v in self.workers_setup_status.values()):
                return
            time.sleep(0.05)

    def on_listening(self, workers: dict[int, Any]) -> None:
        threading.Thread(target=self._watch_worker, daemon=True).start()
        ls.configure_logging(self.serve_spec.log_level, stream=sys.stderr)
        spec = self.serve_spec
        host = f"[{spec.host}]" if ":" in spec.host else spec.host
        print(
            f"serving {spec.model or 'the shipped CoNLL-2003 tagger'} at http://{host}:{spec.port} "
            "(POST /predict, GET /health); SIGTERM or Ctrl-C stops it",
            file=sys.stderr,
            flush=True,
        )


def serve(spec: ServeSpec) -> int:
    """Run the server until SIGTERM or Ctrl-C: 0 when it stopped so, 1 when the model worker died."""
    check_port(spec.host, spec.port)
    server = TaggerServer(spec)
    supervisor = os.getpid()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if os.getpid() != supervisor:  # a forked child (HTTP, manager) inherited this handler: the default
            signal.signal(signum, signal.SIG_DFL if signum == signal.SIGTERM else signal.default_int_handler)
            os.kill(os.getpid(), signum)
            return
        server.stopping = True
        if signum == signal.SIGINT:
            raise KeyboardInterrupt  # LitServe's own way out of run()
        print("SIGTERM: answering the requests in flight, then stopping", file=sys.stderr, flush=True)
        server.request_stop()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        server.run(
            host=spec.host,
            port=spec.port,
            log_level=spec.log_level,
            generate_client_file=False,
            access_log=False,
            **server.uvicorn_options(),
        )
    except _StoppedEarly:
        pass
    except (EOFError, OSError):  # LitServe's manager went down under run()
        if server.stopping:
            raise
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if not server.stopping:  # the model worker died: _watch_worker stopped everything
        code = server.worker_exit
        how = (
            "exit code unknown"
            if code is None
            else f"killed by signal {-code}"
            if code < 0
            else f"exit code {code}"
        )
        print(
            f"error: the model worker stopped unexpectedly ({how}; its messages, if any, are above); the "
            "requests waiting for it were answered 503 and the server stopped",
            file=sys.stderr,
            flush=True,
        )
        return 1
    print("stopped", file=sys.stderr, flush=True)
    return 0
