"""The HTTP side of ``serve``: every ``POST /predict`` body is checked here, in the HTTP process, before it is
queued for the model, and every error is one line of JSON, ``{"error": "..."}`` (docs/serving.md)."""

from __future__ import annotations

from collections.abc import Mapping

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ner_app.limits import SERVE_MAX_BODY_BYTES
from ner_app.serve.request_body import TOO_LARGE, BadRequest, check_length, parse_texts


def error_response(status: int, message: str, headers: Mapping[str, str] | None = None) -> JSONResponse:
    """``{"error": message}`` on one line (starlette's JSON has no newlines) with ``status``."""
    return JSONResponse({"error": message}, status_code=status, headers=headers)


async def http_error(request: Request, exc: Exception) -> JSONResponse:
    """Errors of the routes and of LitServe (404, 405, 504, 500) in the same one-line form as ours."""
    if isinstance(exc, HTTPException):
        return error_response(exc.status_code, str(exc.detail), exc.headers)
    return error_response(500, "internal server error")


class _ClientGone(Exception):
    """The client closed the connection before its body arrived: nobody is left to answer."""


async def _read_body(receive: Receive) -> bytes:
    """The whole body, read no further than the limit (a body without Content-Length included)."""
    chunks, size, more = [], 0, True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _ClientGone
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > SERVE_MAX_BODY_BYTES:
            raise BadRequest(TOO_LARGE, f"body of more than {SERVE_MAX_BODY_BYTES:,} bytes")
        chunks.append(chunk)
        more = message.get("more_body", False)
    return b"".join(chunks)


class PredictGuard:
    """ASGI middleware: a ``POST`` to ``path`` passes on only with a body ``parse_texts`` accepts.

    The body passes on as it came, labelled ``application/json`` whatever the client said (``curl -d`` sends
    a form type, which LitServe would parse as a form)."""

    def __init__(self, app: ASGIApp, path: str = "/predict") -> None:
        self.app, self.path = app, path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != self.path or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        headers = [(k, v) for k, v in scope["headers"] if k.lower() != b"content-type"]
        lengths = [v for k, v in headers if k.lower() == b"content-length"]
        try:
            check_length(lengths[0].decode("latin-1") if lengths else None)
            body = await _read_body(receive)
            parse_texts(body)
        except BadRequest as err:
            await error_response(err.status, err.message)(scope, receive, send)
            return
        except _ClientGone:
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:  # later reads wait for the client's disconnect, as they would have
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        scope = {**scope, "headers": [*headers, (b"content-type", b"application/json")]}
        await self.app(scope, replay, send)
