"""The HTTP side of ``serve``: every ``POST /predict`` body is checked here, in the HTTP process, before it is
queued for the model, and every error is one line of JSON, ``{"error": "..."}`` (docs/serving.md).

Slow clients are bounded here too: the request head must arrive within ``header_timeout`` of the connection's
start or of the previous response's end (``HeaderDeadline``, on uvicorn's httptools protocol, which has no such
limit), and a ``/predict`` body within ``body_timeout`` (``PredictGuard``); either answers 408 and closes the
connection. When the model worker dies, the requests waiting for it are answered 503 (``PredictGuard``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Mapping
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from ner_app.limits import SERVE_MAX_BODY_BYTES
from ner_app.server.request_body import TOO_LARGE, BadRequest, check_length, parse_texts

TIMED_OUT, UNAVAILABLE = 408, 503
WORKER_GONE = "the model worker stopped; this request was not tagged and the server is stopping"
CLOSE = {"connection": "close"}  # uvicorn closes the connection after such a response


def error_response(status: int, message: str, headers: Mapping[str, str] | None = None) -> JSONResponse:
    """``{"error": message}`` on one line (starlette's JSON has no newlines) with ``status``."""
    return JSONResponse({"error": message}, status_code=status, headers=headers)


class HeaderDeadline(HttpToolsProtocol):
    """uvicorn's httptools protocol with a deadline on the request head: a connection whose request line and
    headers are not complete ``header_timeout`` seconds after it opened, or after its previous response went
    out, gets a 408 and is closed. (uvicorn itself times out only idle keep-alive connections, and any byte
    ends that wait: one byte a second would hold a connection for ever.)"""

    header_timeout = 10.0
    _head_timer: asyncio.TimerHandle | None = None

    def _arm(self) -> None:
        self._disarm()
        self._head_timer = self.loop.call_later(self.header_timeout, self._head_too_slow)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_too_slow(self) -> None:
        self._head_timer = None
        if not self.transport.is_closing():
            message = f"request head not complete within {self.header_timeout:g} s"
            body = json.dumps({"error": message}, separators=(",", ":")).encode()  # as starlette writes it
            self.transport.write(
                b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
                b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(body), body)
            )
            self.transport.close()

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self._arm()

    def on_headers_complete(self) -> None:
        self._disarm()
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and (self.cycle is None or self.cycle.response_complete):
            self._arm()  # the next request's head (none is pipelined behind this one)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)


def header_deadline(seconds: float) -> type[HeaderDeadline]:
    """The protocol class to give uvicorn (``http=``), with its deadline."""
    return type("HeaderDeadlineProtocol", (HeaderDeadline,), {"header_timeout": seconds})


async def http_error(request: Request, exc: Exception) -> JSONResponse:
    """Errors of the routes and of LitServe (404, 405, 504, 500) in the same one-line form as ours."""
    if isinstance(exc, HTTPException):
        return error_response(exc.status_code, str(exc.detail), exc.headers)
    return error_response(500, "internal server error")


class ClientGone(Exception):
    """The client closed the connection before its body arrived: nobody is left to answer."""


async def read_body(receive: Receive, limit: int = SERVE_MAX_BODY_BYTES) -> bytes:
    """The whole body, read no further than ``limit`` (a body without Content-Length included)."""
    chunks, size, more = [], 0, True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BadRequest(TOO_LARGE, f"body of more than {limit:,} bytes")
        chunks.append(chunk)
        more = message.get("more_body", False)
    return b"".join(chunks)


class PredictGuard:
    """ASGI middleware: a ``POST`` to ``path`` passes on only with a body ``parse_texts`` accepts, read within
    ``body_timeout`` seconds; once ``worker_gone`` (the read end of a pipe) is readable, the model worker is
    dead and every request still waiting for it is answered 503.

    The body passes on as it came, labelled ``application/json`` whatever the client said (``curl -d`` sends
    a form type, which LitServe would parse as a form)."""

    def __init__(
        self, app: ASGIApp, path: str = "/predict", body_timeout: float = 30.0, worker_gone: int | None = None
    ) -> None:
        self.app, self.path, self.body_timeout, self.worker_gone = app, path, body_timeout, worker_gone
        self._gone: asyncio.Event | None = None  # made in the HTTP process, on its event loop

    def _gone_event(self) -> asyncio.Event | None:
        if self.worker_gone is None:
            return None
        if self._gone is None:
            gone, fd, loop = asyncio.Event(), self.worker_gone, asyncio.get_running_loop()

            def readable() -> None:  # the pipe stays readable: one call is enough
                loop.remove_reader(fd)
                gone.set()

            loop.add_reader(fd, readable)
            self._gone = gone
        return self._gone

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != self.path or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        headers = [(k, v) for k, v in scope["headers"] if k.lower() != b"content-type"]
        lengths = [v for k, v in headers if k.lower() == b"content-length"]
        try:
            check_length(lengths[0].decode("latin-1") if lengths else None)
            body = await asyncio.wait_for(read_body(receive), self.body_timeout)
            parse_texts(body)
        except BadRequest as err:
            await error_response(err.status, err.message)(scope, receive, send)
            return
        except ClientGone:
            return
        except asyncio.TimeoutError:
            message = f"request body not complete within {self.body_timeout:g} s"
            await error_response(TIMED_OUT, message, CLOSE)(scope, receive, send)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:  # later reads wait for the client's disconnect, as they would have
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        scope = {**scope, "headers": [*headers, (b"content-type", b"application/json")]}
        gone = self._gone_event()
        if gone is None:
            await self.app(scope, replay, send)
        elif gone.is_set():
            await error_response(UNAVAILABLE, WORKER_GONE, CLOSE)(scope, receive, send)
        else:
            await self._unless_gone(gone, scope, replay, send)

    async def _unless_gone(self, gone: asyncio.Event, scope: Scope, receive: Receive, send: Send) -> None:
        """The request, or a 503 if the worker dies before its answer has begun."""
        began = False

        async def tracked(message: Message) -> None:
            nonlocal began
            began = began or message["type"] == "http.response.start"
            await send(message)

        answer = asyncio.ensure_future(self.app(scope, receive, tracked))
        waiting = asyncio.ensure_future(gone.wait())
        try:
            await asyncio.wait({answer, waiting}, return_when=asyncio.FIRST_COMPLETED)
            if answer.done() or began:
                await answer
                return
            answer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await answer
            await error_response(UNAVAILABLE, WORKER_GONE, CLOSE)(scope, receive, send)
        finally:
            for task in (answer, waiting):
                task.cancel()
