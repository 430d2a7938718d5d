"""The backend's calls to Label Studio's API, against a loopback server that answers as Label Studio does:
both kinds of key, and every failure one line naming the URL."""

from __future__ import annotations

import pytest

from ner_app.server.label_studio_client import LabelStudioClient, LabelStudioError
from tests.serve.label_studio.fake_api import JWT, LEGACY, label_studio_api
from tests.serve.label_studio.tasks import free_port

TASKS = [{"id": 1, "data": {"text": "Alice flew ."}, "annotations": []}]


def test_a_personal_access_token_is_refreshed_once() -> None:
    with label_studio_api(TASKS) as (url, seen):
        client = LabelStudioClient(url, JWT)
        assert client.annotated_tasks(3) == TASKS
        assert client.annotated_tasks(3) == TASKS
    assert seen == [
        "POST /api/token/refresh/ None",
        "GET /api/projects/3/export?exportType=JSON Bearer access-1",
        "GET /api/projects/3/export?exportType=JSON Bearer access-1",
    ]


def test_a_legacy_token_is_sent_as_is() -> None:
    with label_studio_api(TASKS) as (url, seen):
        assert LabelStudioClient(url + "/", LEGACY).annotated_tasks(3) == TASKS
    assert seen == [f"GET /api/projects/3/export?exportType=JSON Token {LEGACY}"]


def test_failures_are_one_line() -> None:
    with label_studio_api(TASKS) as (url, _):
        with pytest.raises(
            LabelStudioError, match=r"/export\?exportType=JSON: HTTP 401 Unauthorized \(check the API key\)$"
        ):
            LabelStudioClient(url, "wrong").annotated_tasks(3)
        with pytest.raises(
            LabelStudioError, match=r"/api/token/refresh/: HTTP 401 Unauthorized \(check the API key\)$"
        ):
            LabelStudioClient(url, JWT[:-2] + "xx").annotated_tasks(3)
        with pytest.raises(LabelStudioError, match="/api/projects/4/export.*: HTTP 404 Not Found$"):
            LabelStudioClient(url, LEGACY).annotated_tasks(4)
    with label_studio_api({"detail": "an object"}) as (url, _):
        with pytest.raises(LabelStudioError, match="exportType=JSON: expected a list of tasks$"):
            LabelStudioClient(url, LEGACY).annotated_tasks(3)
    port = free_port()
    with pytest.raises(
        LabelStudioError,
        match=f"127.0.0.1:{port}/api/projects/3/.*cannot connect .*is Label Studio running there",
    ):
        LabelStudioClient(f"http://127.0.0.1:{port}", LEGACY).annotated_tasks(3)
    with pytest.raises(LabelStudioError, match="expected http://HOST:PORT or https://HOST"):
        LabelStudioClient("file:///etc/passwd", LEGACY)
    with pytest.raises(LabelStudioError, match="no API key; give --api-key or set LABEL_STUDIO_API_KEY"):
        LabelStudioClient("http://127.0.0.1:8080", "")


def test_an_answer_is_read_within_its_bound() -> None:
    with label_studio_api([{"id": i, "data": {"text": "x" * 100}} for i in range(100)]) as (url, _):
        client = LabelStudioClient(url, LEGACY)
        with pytest.raises(LabelStudioError, match="answer of more than 1,000 bytes"):
            client._call("/api/projects/3/export?exportType=JSON", f"Token {LEGACY}", limit=1000)
