"""What the Label Studio backend asks of Label Studio's own API: a project's annotated tasks.

``GET /api/projects/{id}/export?exportType=JSON`` answers the tasks with at least one annotation, in Label
Studio's JSON export format, the same file a person downloads from the Export dialog (api.labelstud.io,
"Easy export"); ``train`` reads it as any Label Studio export. The API takes either kind of key a user can
copy from Label Studio's Account page: a personal access token (a JWT refresh token, exchanged for a
short-lived access token at ``POST /api/token/refresh/`` and sent as ``Bearer``) or a legacy token (sent as
``Token``). Every answer is read with a size bound and a timeout; any failure is one line naming the URL.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from ner_app.errors import NerAppError
from ner_app.limits import MAX_ANNOTATION_FILE_BYTES

ACCESS_TOKEN_SECONDS = 240  # Label Studio's access tokens live 5 minutes: refresh a little before


class LabelStudioError(NerAppError):
    """Label Studio could not be reached or answered something else than expected: one line with the URL."""


def _is_jwt(key: str) -> bool:
    """A personal access token is a JWT (three base64url parts, the first a JSON header starting ``eyJ``)."""
    return key.startswith("eyJ") and key.count(".") == 2


class LabelStudioClient:
    """Label Studio's API at ``url`` with ``api_key``; ``timeout`` seconds a request."""

    def __init__(self, url: str, api_key: str, timeout: float = 60.0) -> None:
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise LabelStudioError(f"Label Studio URL {url!r}: expected http://HOST:PORT or https://HOST")
        if not api_key:
            raise LabelStudioError(
                f"{url}: no API key; give --api-key or set LABEL_STUDIO_API_KEY (Label Studio: Account & "
                "Settings > Personal Access Token)"
            )
        self.url, self.api_key, self.timeout = url.rstrip("/"), api_key, timeout
        self._access: tuple[str, float] | None = None

    def _authorization(self) -> str:
        if not _is_jwt(self.api_key):
            return f"Token {self.api_key}"
        if self._access is None or time.monotonic() > self._access[1]:
            answer = self._call("/api/token/refresh/", None, {"refresh": self.api_key})
            if not isinstance(answer, dict) or not isinstance(answer.get("access"), str):
                raise LabelStudioError(
                    f'{self.url}/api/token/refresh/: expected {{"access": ...}} in the answer'
                )
            self._access = (answer["access"], time.monotonic() + ACCESS_TOKEN_SECONDS)
        return f"Bearer {self._access[0]}"

    def _call(self, path: str, authorization: str | None, body: Any = None, limit: int = 1 << 20) -> Any:
        """One request; the answer's JSON, read up to ``limit`` bytes."""
        url = f"{self.url}{path}"
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if authorization is not None:
            headers["Authorization"] = authorization
        request = urllib.request.Request(url, data=data, headers=headers, method="POST" if data else "GET")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:  # noqa: S310 (http(s) only)
                payload = answer.read(limit + 1)
        except urllib.error.HTTPError as err:
            hint = " (check the API key)" if err.code in (401, 403) else ""
            raise LabelStudioError(f"{url}: HTTP {err.code} {err.reason}{hint}") from None
        except (urllib.error.URLError, OSError) as err:
            reason = getattr(err, "reason", err)
            raise LabelStudioError(
                f"{url}: cannot connect ({reason}); is Label Studio running there?"
            ) from None
        if len(payload) > limit:
            raise LabelStudioError(f"{url}: answer of more than {limit:,} bytes")
        try:
            return json.loads(payload)
        except (UnicodeDecodeError, ValueError) as err:
            raise LabelStudioError(f"{url}: the answer is not JSON ({str(err)[:80]})") from None

    def annotated_tasks(self, project: int) -> list[dict[str, Any]]:
        """Every task of ``project`` with an annotation, as Label Studio's JSON export holds them."""
        path = f"/api/projects/{project}/export?exportType=JSON"
        tasks = self._call(path, self._authorization(), limit=MAX_ANNOTATION_FILE_BYTES)
        if not isinstance(tasks, list) or not all(isinstance(t, dict) for t in tasks):
            raise LabelStudioError(f"{self.url}{path}: expected a list of tasks")
        return tasks
