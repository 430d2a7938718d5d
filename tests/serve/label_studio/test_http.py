"""``ner-app label-studio`` as a process on 127.0.0.1: Label Studio's routes, bounded bodies with one-line JSON
errors, an annotation event that trains a new version from the project's annotations (read from a loopback
server answering as Label Studio's API), and SIGTERM."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import REPO, TINY
from tests.serve.label_studio.fake_api import LEGACY, label_studio_api
from tests.serve.label_studio.tasks import NER_TEMPLATE, SETUP, conll_tasks, free_port

pytestmark = pytest.mark.system


@contextmanager
def backend(
    model: Path, workdir: Path, config: Path, *options: str
) -> Iterator[tuple[int, subprocess.Popen[str]]]:
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "ner_app",
        "label-studio",
        "--model",
        str(model),
        "--workdir",
        str(workdir),
    ]
    command += ["--config", str(config), "--port", str(port), *options]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        deadline = time.monotonic() + 120
        while True:
            assert process.poll() is None, process.communicate()[0]
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the backend did not start"
                time.sleep(0.3)
        yield port, process
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def request(
    port: int,
    method: str,
    path: str,
    body: Any = None,
    raw: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    payload = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    connection.request(
        method, path, body=payload, headers={"Content-Type": "application/json", **(headers or {})}
    )
    answer = connection.getresponse()
    data = answer.read()
    connection.close()
    return answer.status, json.loads(data) if data else None


def test_routes_and_errors(model: Path, continue_config: Path, tmp_path: Path) -> None:
    with backend(model, tmp_path / "w", continue_config, "--no-train") as (port, process):
        status, health = request(port, "GET", "/health")
        assert status == 200 and health["status"] == "UP" and health["model_version"].startswith("run-")
        assert request(port, "POST", "/setup", SETUP) == (200, {"model_version": health["model_version"]})
        tasks = [{"id": 5, "data": {"text": "Bob Jones met Acme Corp in Berlin ."}}]
        status, answer = request(
            port,
            "POST",
            "/predict",
            {"tasks": tasks, "project": SETUP["project"], "label_config": NER_TEMPLATE},
        )
        assert status == 200 and len(answer["results"]) == 1
        assert {r["value"]["text"] for r in answer["results"][0]["result"]} == {
            "Bob Jones",
            "Acme Corp",
            "Berlin",
        }
        assert request(port, "POST", "/webhook", {"action": "ANNOTATION_CREATED", "project": {"id": 3}}) == (
            200,
            {"status": "training is off (--no-train)"},
        )
        status, versions = request(port, "GET", "/versions")
        assert status == 200 and versions == {
            "versions": [health["model_version"]],
            "model_version": health["model_version"],
        }
        errors = [
            (
                request(port, "POST", "/predict", raw=b"{not json"),
                400,
                "body is not JSON (Expecting property name enclosed in double quotes at line 1 column 2)",
            ),
            (request(port, "POST", "/predict", raw=b"[1]"), 400, "expected a JSON object"),
            (
                request(port, "POST", "/predict", raw=b"{}", headers={"Content-Length": str(1 << 30)}),
                413,
                "body of 1,073,741,824 bytes; at most 134,217,728",
            ),
            (
                request(port, "POST", "/setup", {**SETUP, "project": "4.1"}),
                400,
                "this backend serves project 3; start another (with its own --workdir) for project 4",
            ),
            (request(port, "GET", "/nothing"), 404, "Not Found"),
            (request(port, "GET", "/predict"), 405, "Method Not Allowed"),
        ]
        for (status, answer), expected_status, message in errors:
            assert (status, answer) == (expected_status, {"error": message})
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0


@pytest.mark.slow
def test_an_annotation_event_trains_a_new_version(
    weak_model: Path, continue_config: Path, tmp_path: Path
) -> None:
    tasks = [
        *conll_tasks(TINY / "train.txt"),
        *conll_tasks(TINY / "valid.txt", 100),
        *conll_tasks(TINY / "test.txt", 200),
    ]
    # the export lags the events: the last task's annotation is in it only from its second reading on
    with label_studio_api(tasks[:-1], later=tasks) as (url, seen), backend(
        weak_model, tmp_path / "w", continue_config, "--label-studio-url", url, "--api-key", LEGACY,
        "--heldout", "0.3", "--min-heldout", "1", "--max-epochs", "20",
    ) as (port, process):  # fmt: skip
        _, before = request(port, "GET", "/health")
        request(port, "POST", "/setup", SETUP)
        assert request(port, "POST", "/webhook", {"action": "ANNOTATION_CREATED", "project": {"id": 3}}) == (
            200,
            {"status": "training started"},
        )
        deadline = time.monotonic() + 300
        while (after := request(port, "GET", "/health")[1])["model_version"] == before["model_version"]:
            assert time.monotonic() < deadline, "no new version"
            time.sleep(0.5)
        assert after["model_version"].startswith("run-v1-")
        answer = request(
            port,
            "POST",
            "/predict",
            {"tasks": [{"data": {"text": "Alice Smith flew to Paris ."}}], "label_config": NER_TEMPLATE},
        )[1]
        assert answer["results"][0]["model_version"] == after["model_version"]
        state = tmp_path / "w" / "state.json"
        while len(json.loads(state.read_text())["versions"]) < 3 or len(seen) < 4:
            assert time.monotonic() < deadline, "no second training"
            time.sleep(0.5)
        process.send_signal(signal.SIGTERM)
        output = process.communicate(timeout=30)[0]
    export = f"GET /api/projects/3/export?exportType=JSON Token {LEGACY}"
    # v1 from the first reading; the second, after it, holds one more annotation: v2 from a third; the fourth,
    # after v2, holds nothing new
    assert seen == [export] * 4, output
    assert f"training v2 from {after['model_version']}: " in output
    assert f"serving {after['model_version']} (was {before['model_version']}): held-out F1 " in output
