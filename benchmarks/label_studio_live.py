"""The annotation loop, live: the real Label Studio with ``ner-app label-studio`` as its model backend.

    python -m benchmarks.label_studio_live [--tasks 250] [--rounds 100,200] [--out results/label_studio_live]

Starts Label Studio (the PyPI package ``label-studio``; its ``label-studio`` command from ``--label-studio-bin``,
``$LABEL_STUDIO_BIN`` or PATH; or uses a running one, ``--label-studio-url`` with ``--api-key``) and the backend,
both on 127.0.0.1, then does what a person does in Label Studio's web page, through its API: creates a project
from the named-entity template, imports the tasks, connects the backend (Model settings), retrieves predictions
for every task, and submits annotations, ``--rounds`` at a time (the first R1 tasks, then up to R2, ...). Each
annotation is a sentence's gold entities (CoNLL-2003 dev by default, from ../shared; ``--source`` another CoNLL
file), so the annotators' work is known exactly. After each round it waits until the backend has judged a
model trained on every annotated task, and records the time from the round's last annotation to that moment.
At the end every version is scored on the final held-out tasks, and Label Studio's predictions are retrieved
again to see the served version's name in them. Prints a table; ``--out`` gets it as ``.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.serve.label_studio.tasks import NER_TEMPLATE, regions  # noqa: E402

SHARED = Path(os.environ.get("NER_SHARED", ROOT.parent / "shared"))


def call(
    url: str, method: str = "GET", body: Any = None, token: str | None = None, timeout: float = 600
) -> Any:
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Token {token}"
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            payload = answer.read()
    except urllib.error.HTTPError as err:
        raise SystemExit(f"{method} {url}: HTTP {err.code}: {err.read()[:300]!r}") from None
    return json.loads(payload) if payload else None


def wait_up(url: str, seconds: float, process: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise SystemExit(f"{url}: the process exited with {process.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except (urllib.error.URLError, OSError):
            time.sleep(1)
    raise SystemExit(f"{url}: not up after {seconds:g} s")


def sentences(path: Path, count: int) -> list[tuple[list[str], list[str]]]:
    from ner_app.text.conll import read_conll

    found: dict[str, tuple[list[str], list[str]]] = {}
    for s in read_conll(path):  # one task a text: a sentence that occurs twice (a headline) is one task
        if len(s.tokens) >= 3:
            found.setdefault(" ".join(s.tokens), (list(s.tokens), list(s.tags)))
    return list(found.values())[:count]


def start_label_studio(binary: str, folder: Path, port: int, token: str) -> subprocess.Popen[bytes]:
    command = [
        binary,
        "start",
        "--no-browser",
        "--data-dir",
        str(folder / "label_studio"),
        "--internal-host",
        "127.0.0.1",
        "--port",
        str(port),
        "--host",
        f"http://127.0.0.1:{port}",
        "--username",
        "annotator@example.com",
        "--password",
        "annotator-password",
        "--user-token",
        token,
        "--enable-legacy-api-token",
    ]
    log = open(folder / "label_studio.log", "wb")  # noqa: SIM115 (open while the server runs)
    # Label Studio refuses model backends on loopback addresses unless told not to (its settings)
    env = {**os.environ, "ML_BLOCK_LOCAL_IP": "false", "SSRF_PROTECTION_ENABLED": "false"}
    return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env)


def backend_state(workdir: Path) -> dict[str, Any]:
    path = workdir / "state.json"
    return json.loads(path.read_text()) if path.exists() else {}


def wait_judged(workdir: Path, trained_on: int, seconds: float, log: Path) -> dict[str, Any]:
    """The version trained on ``trained_on`` tasks, once the backend has judged it (served or kept)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for version in backend_state(workdir).get("versions", []):
            if version["trained_on"] == trained_on:
                return version
        time.sleep(0.5)
    raise SystemExit(f"no version trained on {trained_on} tasks after {seconds:g} s; see {log}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--source", type=Path, default=SHARED / "data" / "conll2003" / "valid.txt")
    parser.add_argument("--tasks", type=int, default=250, help="tasks imported")
    parser.add_argument("--rounds", default="100,200", help="annotated tasks after each round")
    parser.add_argument(
        "--model", default=None, help="the backend's first model (default: the shipped tagger)"
    )
    parser.add_argument("--config", default=str(ROOT / "configs" / "own_data_continue.yaml"))
    parser.add_argument("--max-epochs", type=int, default=10)
    parser.add_argument("--heldout", type=float, default=0.2)
    parser.add_argument("--min-heldout", type=int, default=5)
    parser.add_argument(
        "--label-studio-bin", default=os.environ.get("LABEL_STUDIO_BIN") or shutil.which("label-studio")
    )
    parser.add_argument(
        "--label-studio-url", default=None, help="a running Label Studio (else one is started)"
    )
    parser.add_argument("--api-key", default="ner-app-live-token", help="its legacy API token")
    parser.add_argument("--port", type=int, default=8089)
    parser.add_argument("--backend-port", type=int, default=9090)
    parser.add_argument("--latency-repeats", type=int, default=30)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if not args.source.is_file():
        raise SystemExit(f"{args.source}: not found (CoNLL-2003 dev from ../shared, or --source FILE)")
    rounds = [int(r) for r in args.rounds.split(",")]
    texts = sentences(args.source, args.tasks)
    if len(texts) < max(rounds):
        raise SystemExit(f"{args.source}: {len(texts)} sentences; --rounds needs {max(rounds)}")
    folder = Path(tempfile.mkdtemp(prefix="label_studio_live_"))
    processes: list[subprocess.Popen[bytes]] = []
    try:
        ls_url = args.label_studio_url
        started = time.monotonic()
        if ls_url is None:
            if not args.label_studio_bin:
                raise SystemExit(
                    "label-studio is not installed (pip install label-studio, or --label-studio-bin)"
                )
            processes.append(start_label_studio(args.label_studio_bin, folder, args.port, args.api_key))
            ls_url = f"http://127.0.0.1:{args.port}"
            wait_up(f"{ls_url}/health", 300, processes[-1])
        ls_start = time.monotonic() - started
        token = args.api_key
        workdir = folder / "backend"
        command = [
            sys.executable, "-m", "ner_app", "label-studio", "--workdir", str(workdir),
            "--port", str(args.backend_port), "--label-studio-url", ls_url, "--api-key", token,
            "--config", args.config, "--max-epochs", str(args.max_epochs), "--heldout", str(args.heldout),
            "--min-heldout", str(args.min_heldout),
        ]  # fmt: skip
        if args.model:
            command += ["--model", args.model]
        backend_log = folder / "backend.log"
        processes.append(
            subprocess.Popen(
                command,
                stdout=open(backend_log, "wb"),
                stderr=subprocess.STDOUT,
                start_new_session=True,  # noqa: SIM115
            )
        )
        backend_url = f"http://127.0.0.1:{args.backend_port}"
        wait_up(f"{backend_url}/health", 300, processes[-1])

        project = call(
            f"{ls_url}/api/projects", "POST", {"title": "ner_app live", "label_config": NER_TEMPLATE}, token
        )["id"]
        call(
            f"{ls_url}/api/projects/{project}/import",
            "POST",
            [{"text": " ".join(tokens)} for tokens, _ in texts],
            token,
        )
        listed = call(f"{ls_url}/api/tasks?project={project}&page_size={len(texts) + 10}", token=token)
        tasks = sorted(listed["tasks"] if isinstance(listed, dict) else listed, key=lambda t: t["id"])
        by_text = {t["data"]["text"]: t["id"] for t in tasks}
        ml = call(
            f"{ls_url}/api/ml", "POST", {"url": backend_url, "project": project, "title": "ner_app"}, token
        )

        def retrieve(ids: list[int] | None) -> float:
            items = {"all": True, "excluded": []} if ids is None else {"all": False, "included": ids}
            begin = time.monotonic()
            call(
                f"{ls_url}/api/dm/actions?id=retrieve_tasks_predictions&project={project}",
                "POST",
                {"selectedItems": items},
                token,
            )
            return time.monotonic() - begin

        retrieve_all = retrieve(None)
        first_task = call(f"{ls_url}/api/tasks/{tasks[0]['id']}", token=token)
        versions_seen = sorted({p["model_version"] for p in first_task.get("predictions", [])})
        one_task = [retrieve([tasks[i % len(tasks)]["id"]]) for i in range(5)]
        direct = []
        for i in range(args.latency_repeats):
            task = {"id": tasks[i]["id"], "data": tasks[i]["data"]}
            begin = time.monotonic()
            call(f"{backend_url}/predict", "POST", {"tasks": [task], "label_config": NER_TEMPLATE})
            direct.append(time.monotonic() - begin)

        from ner_app.server.backend_training import held_out

        records = []
        done = 0
        for target in rounds:
            for tokens, tags in texts[done:target]:
                text = " ".join(tokens)
                from ner_app.text.tags import detect_scheme

                call(
                    f"{ls_url}/api/tasks/{by_text[text]}/annotations",
                    "POST",
                    {"result": regions(tokens, tags, detect_scheme([tags])), "was_cancelled": False},
                    token,
                )
            last = time.monotonic()
            annotated = [by_text[" ".join(t)] for t, _ in texts[:target]]
            trained_on = sum(1 for i in annotated if not held_out(i, args.heldout))
            version = wait_judged(workdir, trained_on, 1800, backend_log)
            records.append(
                {
                    "annotated": target,
                    "trained_on": trained_on,
                    "held_out": target - trained_on,
                    "seconds_to_judged": round(time.monotonic() - last, 1),
                    **version,
                }
            )
            done = target
        time.sleep(1)
        retrieve(None)
        after = call(f"{ls_url}/api/tasks/{tasks[-1]['id']}", token=token)
        served = backend_state(workdir)
        final = workdir / "versions" / f"v{served['versions'][-1]['number']}" / "heldout.conll"
        scores = []
        from ner_app.predict.api import load_tagger
        from ner_app.predict.evaluate import evaluate_file

        for version in served["versions"]:
            tagger = load_tagger(version["export"])
            result = evaluate_file(tagger.predictor, final)[0]
            scores.append({"version": version["model_version"], "final_heldout_f1": round(result["f1"], 2)})
        summary = {
            "machine": os.uname().nodename,
            "source": str(args.source.name),
            "tasks": len(texts),
            "label_studio_start_s": round(ls_start, 1),
            "ml_backend": {k: ml.get(k) for k in ("id", "state", "model_version")},
            "retrieve_all_predictions_s": round(retrieve_all, 2),
            "retrieve_one_task_median_s": round(statistics.median(one_task), 3),
            "backend_predict_one_task_median_s": round(statistics.median(direct), 4),
            "backend_predict_one_task_p90_s": round(sorted(direct)[int(0.9 * len(direct)) - 1], 4),
            "first_prediction_versions": versions_seen,
            "rounds": records,
            "final_heldout_tasks": final.read_text().count("-DOCSTART-"),
            "versions_on_final_heldout": scores,
            "served": served["versions"][served["serving"]]["model_version"],
            "predictions_after": sorted({p["model_version"] for p in after.get("predictions", [])}),
        }
    finally:
        for process in reversed(processes):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
    lines = [
        f"Label Studio live, {summary['tasks']} tasks from {summary['source']}",
        "",
        "| annotated | trained on | held out | annotation -> judged (s) | version | held-out F1 |",
        "|---:|---:|---:|---:|---|---:|",
        *(
            f"| {r['annotated']} | {r['trained_on']} | {r['held_out']} | {r['seconds_to_judged']} | "
            f"{r['model_version']} | {r['heldout_f1']:.2f} |"
            for r in summary["rounds"]
        ),
        "",
        "| version | F1 on the final held-out tasks |",
        "|---|---:|",
        *(f"| {s['version']} | {s['final_heldout_f1']:.2f} |" for s in scores),
        "",
        f"predict, one task: {summary['backend_predict_one_task_median_s'] * 1000:.1f} ms median at the backend; "
        f"{summary['retrieve_one_task_median_s'] * 1000:.0f} ms through Label Studio's Retrieve Predictions; "
        f"all {summary['tasks']} tasks {summary['retrieve_all_predictions_s']:.1f} s",
        f"served at the end: {summary['served']}; Label Studio's predictions now: {summary['predictions_after']}",
    ]
    print("\n".join(lines))
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y-%m-%d")
        (args.out / f"{stamp}.json").write_text(json.dumps(summary, indent=2) + "\n")
        (args.out / f"{stamp}.md").write_text("\n".join(lines) + "\n")
    shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
