"""``serve``: a real server on 127.0.0.1 answers what ``predict`` prints, refuses every hostile request with a
one-line JSON 4xx while good requests go on, and drains on SIGTERM (docs/serving.md#serving-over-http)."""

from __future__ import annotations

import contextlib
import http.client
import io
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import train
from ner_app.bilm import save_bilm
from ner_app.cli.commands import main
from ner_app.limits import SERVE_MAX_BODY_BYTES, SERVE_MAX_CHARS, SERVE_MAX_TEXTS
from ner_app.text.conll import read_conll
from tests.helpers import random_bilm

pytestmark = pytest.mark.system  # trains a tiny run and starts servers: out of the fast lane

pytest.importorskip("litserve", reason="serve needs LitServe (pip install -e '.[serve]')")

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "data" / "tiny_conll"
RAW = [
    "Alice Smith flew to Paris.",
    "",
    "Acme Corp hired Bob Jones in Berlin. Then Alice left!",
    "Zürich and São Paulo 東京 😀 Mr. O'Neill didn't go.",
    "Bob " * 400,
]
JSON = {"Content-Type": "application/json"}


@pytest.fixture(scope="module")
def export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("serve")
    options, weights = save_bilm(random_bilm(), tmp / "bilm")
    code = train.main(
        [
            "--config",
            str(ROOT / "configs/tiny.yaml"),
            f"output_dir={tmp / 'run'}",
            f"data.dir={TINY}",
            f"elmo.options={options}",
            f"elmo.weights={weights}",
            "trainer.threads=1",
        ]
    )
    assert code == 0
    return tmp / "run" / "export"


@pytest.fixture(scope="module")
def expected(export: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """text -> the JSON object ``predict`` prints for it (CoNLL sentences as raw text, and RAW)."""
    sentences = [" ".join(s.tokens) for part in ("train", "test") for s in read_conll(TINY / f"{part}.txt")]
    texts = [*RAW, *sentences]
    source = tmp_path_factory.mktemp("predict") / "in.txt"
    source.write_text("\n".join(texts) + "\n", encoding="utf-8")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["predict", "--model", str(export), "--input", str(source), "--threads", "1"]) == 0
    printed = [json.loads(line) for line in out.getvalue().splitlines()]
    assert len(printed) == len(texts) and any(p["entities"] for p in printed)
    return dict(zip(texts, printed, strict=True))


def same(answer: dict, want: list[dict]) -> bool:
    """``answer`` is ``{"results": want}``, scores to one unit of their 4th decimal: a sentence's float sums
    depend on the batch it is padded into, in ``predict`` too (a line alone or among others), so a rounded
    score can differ by 0.0001 when requests are batched together; spans, types and texts are exact."""
    got = answer["results"]
    if len(got) != len(want):
        return False
    for g, w in zip(got, want, strict=True):
        if g["text"] != w["text"] or len(g["entities"]) != len(w["entities"]):
            return False
        for a, b in zip(g["entities"], w["entities"], strict=True):
            if {**a, "score": 0} != {**b, "score": 0} or abs(a["score"] - b["score"]) > 1.5e-4:
                return False
    return True


def close(a: object, b: object) -> bool:
    """Equal JSON, but scores (``score``, ``o_score``) to within 1.5e-4 (see ``same``)."""
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return False
        return all(abs(a[k] - b[k]) <= 1.5e-4 if k in ("score", "o_score") else close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def call(
    port: int,
    method: str,
    path: str,
    body: bytes | None = None,
    headers: dict | None = None,
    timeout: float = 300,
) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def ask(port: int, texts: list[str]) -> tuple[int, dict]:
    status, data = call(port, "POST", "/predict", json.dumps({"texts": texts}).encode(), JSON)
    return status, json.loads(data)


@contextlib.contextmanager
def running(export: Path, log: Path, *extra: str) -> Iterator[tuple[subprocess.Popen, int]]:
    """``python -m ner_app serve`` on a free port, ready (``/health`` 200); stopped (its group killed) after."""
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "ner_app",
        "serve",
        "--model",
        str(export),
        "--port",
        str(port),
        "--threads",
        "1",
        *extra,
    ]
    with open(log, "wb") as err:
        proc = subprocess.Popen(
            command,
            stdout=subprocess.DEVNULL,
            stderr=err,
            cwd=ROOT,
            start_new_session=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    try:
        deadline = time.monotonic() + 300
        while True:
            assert proc.poll() is None, f"serve exited with {proc.returncode}: {log.read_text()[-2000:]}"
            with contextlib.suppress(OSError):
                if call(port, "GET", "/health", timeout=5)[0] == 200:
                    break
            assert time.monotonic() < deadline, f"serve not ready after 300 s: {log.read_text()[-2000:]}"
            time.sleep(0.2)
        yield proc, port
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=90)
            except subprocess.TimeoutExpired:
                pass
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # whatever of its group is left


@pytest.fixture(scope="module")
def server(export: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    with running(export, tmp_path_factory.mktemp("log") / "serve.err") as (_, port):
        yield port


def test_answers_are_what_predict_prints(server: int, expected: dict[str, dict]) -> None:
    texts = list(expected)
    status, answer = ask(server, texts)
    assert status == 200 and answer == {"results": [expected[t] for t in texts]}
    assert ask(server, []) == (200, {"results": []})
    # curl -d sends a form content type: the body is still read as JSON
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    status, data = call(server, "POST", "/predict", json.dumps({"texts": RAW[:1]}).encode(), form)
    assert status == 200 and json.loads(data) == {"results": [expected[RAW[0]]]}


def test_concurrent_requests_are_batched_and_each_gets_its_own_answer(server: int, expected: dict) -> None:
    texts = list(expected)
    requests = [texts[i % len(texts) : i % len(texts) + 1 + i % 3] for i in range(48)]
    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(lambda r: ask(server, r), requests))
    for request, (status, answer) in zip(requests, answers, strict=True):
        assert status == 200 and same(answer, [expected[t] for t in request]), request


def test_reading_options_answer_what_predict_prints(
    server: int, export: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """min_score, alternatives and flag_missed in a request: predict's answer with the same options; requests
    with different options batched together each get their own."""
    texts = RAW[:4]
    source = tmp_path / "in.txt"
    source.write_text("\n".join(texts) + "\n", encoding="utf-8")
    flags = ["--min-score", "0.2", "--alternatives", "2", "--flag-missed", "0.99"]
    assert main(["predict", "--model", str(export), "--input", str(source), "--threads", "1", *flags]) == 0
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert any(e.get("alternatives") for p in printed for e in p["entities"])
    body = {"texts": texts, "min_score": 0.2, "alternatives": 2, "flag_missed": 0.99}
    asked = [body, {"texts": texts}] * 4
    with ThreadPoolExecutor(8) as pool:
        answers = list(
            pool.map(lambda b: call(server, "POST", "/predict", json.dumps(b).encode(), JSON), asked)
        )
    for request, (status, data) in zip(asked, answers, strict=True):
        results = json.loads(data)["results"]
        assert status == 200
        if "alternatives" in request:
            assert close(results, printed)
        else:
            assert all(
                "flagged" not in r and all("alternatives" not in e for e in r["entities"]) for r in results
            )


def test_health_answers(server: int) -> None:
    assert call(server, "GET", "/health") == (200, b"ok")


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_the_documented_curl_commands(server: int, expected: dict) -> None:
    """docs/serving.md's two curl lines, on the test server's port: curl -d sends a form content type."""
    body = json.dumps({"texts": [RAW[0], RAW[2]]}, ensure_ascii=False)
    done = subprocess.run(
        ["curl", "-s", f"127.0.0.1:{server}/predict", "-d", body],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert json.loads(done.stdout) == {"results": [expected[RAW[0]], expected[RAW[2]]]}
    health = subprocess.run(
        ["curl", "-s", f"127.0.0.1:{server}/health"], capture_output=True, text=True, timeout=60
    )
    assert health.stdout == "ok"


def _chunks(size: int) -> Iterator[bytes]:
    for _ in range(size // 65536 + 1):
        yield b" " * 65536


HOSTILE = [  # name, method, path, body, headers, status, part of the message
    ("not JSON", "POST", "/predict", b'{"texts": [', JSON, 400, "not JSON"),
    ("empty body", "POST", "/predict", b"", JSON, 400, "not JSON"),
    (
        "invalid UTF-8",
        "POST",
        "/predict",
        b'{"texts": ["Ber\xfflin"]}',
        JSON,
        400,
        "byte 16 (0xff) is not UTF-8",
    ),
    ("texts not a list", "POST", "/predict", b'{"texts": "Alice"}', JSON, 400, '"texts" is a string'),
    ("a text not a string", "POST", "/predict", b'{"texts": ["ok", 3]}', JSON, 400, '"texts"[1] is a number'),
    ("array body", "POST", "/predict", b'["Alice"]', JSON, 400, "body is an array"),
    ("unknown key", "POST", "/predict", b'{"text": ["Alice"]}', JSON, 400, 'unknown key "text"'),
    ("no texts", "POST", "/predict", b"{}", JSON, 400, 'no "texts"'),
    (
        "lone surrogate",
        "POST",
        "/predict",
        b'{"texts": ["a\\ud800"]}',
        JSON,
        400,
        "character 2 is a lone surrogate",
    ),
    ("deep nesting", "POST", "/predict", b"[" * 100_000, JSON, 400, "nested too deep"),
    (
        "huge integer",
        "POST",
        "/predict",
        b'{"texts": [' + b"7" * 5000 + b"]}",
        JSON,
        400,
        "body is not a request",
    ),
    (
        "too many texts",
        "POST",
        "/predict",
        json.dumps({"texts": ["a"] * (SERVE_MAX_TEXTS + 1)}).encode(),
        JSON,
        413,
        f"at most {SERVE_MAX_TEXTS} in one request",
    ),
    (
        "too many characters",
        "POST",
        "/predict",
        json.dumps({"texts": ["a" * SERVE_MAX_CHARS, "b"]}).encode(),
        JSON,
        413,
        f"at most {SERVE_MAX_CHARS:,}",
    ),
    ("body too large", "POST", "/predict", b" " * (SERVE_MAX_BODY_BYTES + 1), JSON, 413, "bytes; at most"),
    ("chunked body too large", "POST", "/predict", "chunks", JSON, 413, "body of more than"),
    ("GET /predict", "GET", "/predict", None, {}, 405, "Method Not Allowed"),
    (
        "min_score above 1",
        "POST",
        "/predict",
        b'{"texts": [], "min_score": 1.5}',
        JSON,
        400,
        '"min_score" is 1.5',
    ),
    (
        "negative alternatives",
        "POST",
        "/predict",
        b'{"texts": [], "alternatives": -1}',
        JSON,
        400,
        "integer in",
    ),
    (
        "alternatives not a number",
        "POST",
        "/predict",
        b'{"texts": [], "alternatives": "2"}',
        JSON,
        400,
        '"2"',
    ),
    (
        "flag_missed NaN",
        "POST",
        "/predict",
        b'{"texts": [], "flag_missed": NaN}',
        JSON,
        400,
        "number in [0, 1]",
    ),
    ("flag_missed a list", "POST", "/predict", b'{"texts": [], "flag_missed": [0.5]}', JSON, 400, "an array"),
    ("unknown path", "POST", "/tag", b'{"texts": []}', JSON, 404, "Not Found"),
]


def _hostile(port: int, method: str, path: str, body: bytes | str | None, headers: dict) -> tuple[int, bytes]:
    if body != "chunks":
        return call(port, method, path, body, headers)  # type: ignore[arg-type]
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    try:  # no Content-Length: the limit holds while reading
        conn.request(method, path, body=_chunks(SERVE_MAX_BODY_BYTES), headers=headers, encode_chunked=True)
        response = conn.getresponse()
        return response.status, response.read()
    except (BrokenPipeError, ConnectionResetError):
        pytest.fail("the server closed the connection instead of answering 413")
    finally:
        conn.close()


def test_hostile_requests_get_one_line_json_errors_while_good_ones_succeed(
    server: int, expected: dict
) -> None:
    texts = list(expected)
    stop, good = threading.Event(), []

    def keep_asking(seed: int) -> None:
        rng = random.Random(seed)
        while not stop.is_set() or len(good) < 8:
            request = rng.sample(texts, rng.randint(1, 3))
            good.append((request, *ask(server, request)))

    with ThreadPoolExecutor(3) as pool:
        workers = [pool.submit(keep_asking, seed) for seed in range(3)]
        try:
            for name, method, path, body, headers, status, part in HOSTILE:
                got, data = _hostile(server, method, path, body, headers)
                assert got == status, (name, got, data[:200])
                assert data.count(b"\n") == 0 and data.startswith(b'{"error":"'), (name, data[:200])
                message = json.loads(data)["error"]
                assert part in message and len(json.loads(data)) == 1, (name, message)
        finally:
            stop.set()
            for worker in workers:
                worker.result()
    assert good and all(s == 200 and same(a, [expected[t] for t in r]) for r, s, a in good)


@pytest.mark.slow
def test_sigterm_answers_the_requests_in_flight_and_exits_0(export: Path, tmp_path: Path) -> None:
    log = tmp_path / "serve.err"
    # 8 requests of nearly 100,000 characters: one batch of seconds of tagging (0.6 s a request here, idle)
    texts = ["Alice Smith flew to Paris and met Bob Jones in Berlin . " * 35] * 48
    with running(export, log) as (proc, port):
        answers: list = []

        def client() -> None:
            status, answer = ask(port, texts)
            answers.append((time.monotonic(), status, answer))

        clients = [threading.Thread(target=client) for _ in range(8)]
        for thread in clients:
            thread.start()
        time.sleep(1.0)  # all 8 are in the worker's batch
        stopped = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        for thread in clients:
            thread.join(timeout=120)
        assert proc.wait(timeout=120) == 0
    assert len(answers) == 8 and any(when > stopped for when, _, _ in answers)  # in flight at SIGTERM
    first = answers[0][2]["results"][0]
    for _, status, answer in answers:
        assert status == 200 and len(answer["results"]) == len(texts) and answer["results"][0] == first
    err = log.read_text()
    assert "SIGTERM: answering the requests in flight, then stopping" in err and "Traceback" not in err
    with pytest.raises(OSError):
        call(port, "GET", "/health", timeout=5)


def _children(pid: int) -> list[int]:
    return [
        int(c)
        for task in Path(f"/proc/{pid}/task").iterdir()
        for c in (task / "children").read_text().split()
    ]


def _tree_rss(pid: int) -> int:
    """Resident bytes of ``pid`` and all its descendants (the supervisor, HTTP, manager and model worker)."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        with contextlib.suppress(OSError):
            status = Path(f"/proc/{p}/status").read_text()
            total += (
                int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:"))) * 1024
            )
            todo += _children(p)
    return total


@pytest.mark.slow
def test_thousands_of_requests_with_hostile_ones_mixed_in(
    export: Path, expected: dict, tmp_path: Path
) -> None:
    texts, rng = list(expected), random.Random(0)
    plan = []  # (texts, None) for a good request, (None, hostile case) for a bad one
    for _ in range(3000):
        if rng.random() < 0.1:
            plan.append((None, rng.choice([h for h in HOSTILE if h[3] != "chunks"])))
        else:
            plan.append((rng.sample(texts, rng.randint(1, 4)), None))

    def send(item: tuple) -> bool:
        request, bad = item
        if bad is None:
            status, answer = ask(port, request)
            return status == 200 and same(answer, [expected[t] for t in request])
        _, method, path, body, headers, status, part = bad
        got, data = call(port, method, path, body, headers)
        return got == status and part in json.loads(data)["error"]

    with running(export, tmp_path / "serve.err") as (proc, port), ThreadPoolExecutor(8) as pool:
        assert all(pool.map(send, plan[:300]))  # warm-up
        warm = _tree_rss(proc.pid)
        results = list(pool.map(send, plan[300:]))
        after = _tree_rss(proc.pid)
    assert all(results), f"{results.count(False)} of {len(results)} requests answered wrongly"
    assert after <= 1.10 * warm, (
        f"resident memory grew from {warm / 2**20:.0f} MiB to {after / 2**20:.0f} MiB"
    )
