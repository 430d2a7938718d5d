"""A loopback HTTP server that answers the two calls the backend makes of Label Studio's API, as Label Studio
1.23 answers them (jwt_auth/urls.py: ``POST /api/token/refresh/``; data_export/api.py: ``GET
/api/projects/{id}/export?exportType=JSON``), with a key check; it records what it was asked."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

JWT = "eyJhbGciOiJIUzI1NiJ9.eyJ0b2tlbl90eXBlIjoicmVmcmVzaCJ9.c2lnbmF0dXJl"  # a refresh token's shape
LEGACY = "0123456789abcdef0123456789abcdef01234567"


@contextmanager
def label_studio_api(tasks: Any, project: int = 3, later: Any = None) -> Iterator[tuple[str, list[str]]]:
    """The server's URL and the list of requests it got (``METHOD PATH AUTHORIZATION``). The export answers
    ``tasks``, and from its second call on ``later`` when given (annotations that arrived meanwhile)."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _answer(self, status: int, body: Any) -> None:
            payload = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            seen.append(f"POST {self.path} {self.headers.get('Authorization')}")
            if self.path == "/api/token/refresh/" and body.get("refresh") == JWT:
                self._answer(200, {"access": "access-1"})
            else:
                self._answer(401, {"detail": "Token is invalid or expired"})

        def do_GET(self) -> None:
            auth = self.headers.get("Authorization")
            seen.append(f"GET {self.path} {auth}")
            if auth not in ("Bearer access-1", f"Token {LEGACY}"):
                self._answer(401, {"detail": "Authentication credentials were not provided."})
            elif self.path == f"/api/projects/{project}/export?exportType=JSON":
                exports = sum(1 for s in seen if "/export?" in s)
                self._answer(200, later if later is not None and exports > 1 else tasks)
            else:
                self._answer(404, {"detail": "Not found."})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()
