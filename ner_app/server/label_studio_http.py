"""The Label Studio backend over HTTP (``ner-app label-studio``): Label Studio's ML backend routes on uvicorn.

``GET /health``, ``POST /setup``, ``POST /predict``, ``POST /webhook``, ``POST /train`` and ``GET /versions``,
each answered from ``Backend`` (``label_studio_backend.py``). Bounded as ``serve`` is: a body over the limit is
refused before it is read (413), a body must arrive within ``body_timeout`` and a request head within
``header_timeout`` (408), open connections are capped; every error is one line of JSON, ``{"error": ...}``.
Tagging runs in a worker thread, so the event loop keeps answering while a request is tagged or a model trains
(training runs in a child process). SIGTERM and Ctrl-C stop the server after the requests in flight, and stop a
training that runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ner_app.server.http_guard import ClientGone, error_response, header_deadline, http_error, read_body
from ner_app.server.label_studio_backend import Backend
from ner_app.server.request_body import BAD_REQUEST, BadRequest, check_length, parse_json

MAX_BODY_BYTES = 1 << 27  # 128 MiB: /train carries every annotated task of a project
TIMED_OUT = 408

Handler = Callable[[dict[str, Any]], dict[str, Any]]


def _route(
    handler: Handler, body_timeout: float, in_thread: bool
) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        try:
            check_length(request.headers.get("content-length"), MAX_BODY_BYTES)
            raw = await asyncio.wait_for(read_body(request.receive, MAX_BODY_BYTES), body_timeout)
            document = parse_json(raw, MAX_BODY_BYTES)
            if not isinstance(document, dict):
                raise BadRequest(BAD_REQUEST, "expected a JSON object")
            answer = await run_in_threadpool(handler, document) if in_thread else handler(document)
        except BadRequest as err:
            return error_response(err.status, err.message)
        except TimeoutError:
            return error_response(
                TIMED_OUT, f"body not complete within {body_timeout:g} s", {"connection": "close"}
            )
        except ClientGone:
            return Response(status_code=BAD_REQUEST)
        return JSONResponse(answer)

    return endpoint


def make_app(backend: Backend, body_timeout: float = 30.0) -> Starlette:
    """The routes of Label Studio's ML backend protocol on ``backend``."""

    async def health(request: Request) -> Response:
        return JSONResponse(backend.health())

    async def versions(request: Request) -> Response:
        return JSONResponse(
            {
                "versions": [v.model_version for v in backend.versions.all],
                "model_version": backend.current.model_version,
            }
        )

    routes = [
        Route("/", health, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
        Route("/versions", versions, methods=["GET"]),
        Route("/setup", _route(backend.setup, body_timeout, in_thread=False), methods=["POST"]),
        Route("/predict", _route(backend.predict, body_timeout, in_thread=True), methods=["POST"]),
        Route("/webhook", _route(backend.webhook, body_timeout, in_thread=False), methods=["POST"]),
        Route("/train", _route(backend.train, body_timeout, in_thread=False), methods=["POST"]),
    ]
    return Starlette(routes=routes, exception_handlers={HTTPException: http_error, Exception: http_error})


def run_server(
    backend: Backend,
    host: str,
    port: int,
    body_timeout: float = 30.0,
    header_timeout: float = 10.0,
    max_connections: int = 64,
) -> None:
    """Serve until SIGTERM or Ctrl-C, then stop a training that runs."""
    import uvicorn

    config = uvicorn.Config(
        make_app(backend, body_timeout),
        host=host,
        port=port,
        log_level="warning",
        http=header_deadline(header_timeout),
        limit_concurrency=max_connections,
        timeout_keep_alive=5,
    )
    server = _server_class()(config)
    try:
        server.run()
    finally:
        backend.stop()


def _server_class() -> type:
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server whose SIGTERM and Ctrl-C stop it gracefully and end the command with exit code 0
        (uvicorn raises the signal again once stopped, which would end the process by it, 143)."""

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            previous = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
            try:
                yield
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)

    return Server
