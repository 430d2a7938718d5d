"""Throughput and latency of ``serve`` under load, against one ``predict`` process per request and against
in-process batched prediction (the ceiling).

    python -m benchmarks.serve_load [--sizes shipped,original] [--clients 1,8,32] [--seconds 8] [--rounds 2]

Each request is one CoNLL-2003 dev sentence (its tokens joined by spaces; a fixed seeded sample of 256; skipped
when ``../shared`` has no dev file). For each model: one process per request is ``python -m ner_app predict
--input -`` with one sentence, start-up and loading included, one after another; the ceiling is
``Predictor.predict_texts`` over all sampled sentences in one call (batches of 64 sorted by length); "in
process, c sentences a call" tags them c at a time, the batches c clients can form at best, without HTTP;
``serve`` is ``python -m ner_app serve`` with c client threads, each sending its next request as soon as its
last is answered (keep-alive connections), for ``--seconds``. The in-process and served measurements take
turns in ``--rounds`` rounds, so that a busy machine slows them alike; rates are medians over rounds, latency
percentiles pool the rounds. The server and the in-process predictor use ``--threads`` torch threads.

Models: ``shipped`` is the shipped tagger (``data/models/conll2003``, or ``--model``; it has no ELMo);
``shipped-bilm`` is a tagger on the shipped biLM (``data/bilm``) with the sizes of
``configs/conll2003_elmo.yaml``, trained one epoch on the tiny corpus (speed does not depend on what was
learnt); ``original`` is that tagger on an original-size ELMo biLM (93.6M parameters) with random weights
(``common.random_bilm``). Prints a markdown table; ``--out`` gets it and every latency as JSON.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.common import ROOT, SHARED, machine, print_table, random_bilm
from ner_app.bilm import save_bilm
from ner_app.files import write_text
from ner_app.predict.api import SHIPPED_MODEL
from ner_app.text.conll import read_conll

DEV = SHARED / "data" / "conll2003" / "valid.txt"
TINY = ROOT / "tests" / "data" / "tiny_conll"


def dev_sentences(count: int, seed: int = 0) -> list[str]:
    """``count`` dev sentences (seeded sample, file order), tokens joined by spaces."""
    sentences = [" ".join(s.tokens) for s in read_conll(DEV)]
    chosen = sorted(random.Random(seed).sample(range(len(sentences)), min(count, len(sentences))))
    return [sentences[i] for i in chosen]


def stand_in(size: str, folder: Path) -> Path:
    """An export of the ELMo tagger's shape on the shipped biLM (``shipped-bilm``) or a random original-size
    biLM (``original``), trained one epoch on the tiny corpus."""
    import train

    if size == "original":
        options, weights = save_bilm(random_bilm("original").eval(), folder / "bilm")
    else:
        options, weights = ROOT / "data/bilm/options.json", ROOT / "data/bilm/weights.hdf5"
    code = train.main(
        [
            "--config",
            str(ROOT / "configs/conll2003_elmo.yaml"),
            f"output_dir={folder / 'run'}",
            f"data.dir={TINY}",
            "model.glove=null",
            f"elmo.options={options}",
            f"elmo.weights={weights}",
            "elmo.cache_dir=null",
            "trainer.max_epochs=1",
            "trainer.threads=1",
            "trainer.enable_progress_bar=false",
        ]
    )
    if code != 0:
        raise RuntimeError(f"training the {size} stand-in failed ({code})")
    return folder / "run" / "export"


def per_process(model: Path, texts: list[str], threads: int, runs: int) -> list[float]:
    """Wall seconds of ``predict`` processes, one sentence each, one after another."""
    seconds = []
    for text in texts[:runs]:
        start = time.perf_counter()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "ner_app",
                "predict",
                "--model",
                str(model),
                "--input",
                "-",
                "--threads",
                str(threads),
            ],
            input=text + "\n",
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        )
        seconds.append(time.perf_counter() - start)
    return seconds


def all_at_once(predictor: Any, texts: list[str]) -> float:
    """Sentences per second of one ``predict_texts`` call over all ``texts``: the ceiling."""
    start = time.perf_counter()
    list(predictor.predict_texts(texts))
    return len(texts) / (time.perf_counter() - start)


def grouped(predictor: Any, texts: list[str], size: int, seconds: float) -> float:
    """Sentences per second of ``predict_texts`` calls of ``size`` sentences each, for about ``seconds``."""
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        list(predictor.predict_texts([texts[(done + i) % len(texts)] for i in range(size)]))
        done += size
    return done / (time.perf_counter() - start)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_server(model: Path, threads: int, log: Path, *extra: str) -> tuple[subprocess.Popen, int]:
    port = free_port()
    with open(log, "wb") as err:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ner_app",
                "serve",
                "--model",
                str(model),
                "--port",
                str(port),
                "--threads",
                str(threads),
                *extra,
            ],
            stdout=subprocess.DEVNULL,
            stderr=err,
            cwd=ROOT,
            start_new_session=True,
        )
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/health")
            if conn.getresponse().status == 200:
                return proc, port
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"serve did not start: {log.read_text()[-2000:]}")


def load(port: int, texts: list[str], clients: int, seconds: float) -> dict[str, Any]:
    """``clients`` closed-loop threads sending one-sentence requests for about ``seconds``: requests/s and
    every latency."""
    latencies: list[float] = []
    counter, lock, failed = iter(range(1 << 62)), threading.Lock(), []
    start = time.perf_counter()
    last = [start]

    def client() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        while time.perf_counter() - start < seconds:
            with lock:
                index = next(counter)
            body = json.dumps({"texts": [texts[index % len(texts)]]}).encode()
            sent = time.perf_counter()
            conn.request("POST", "/predict", body=body, headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            response.read()
            done = time.perf_counter()
            with lock:
                latencies.append(done - sent)
                last[0] = max(last[0], done)
                if response.status != 200:
                    failed.append(response.status)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failed:
        raise RuntimeError(f"{len(failed)} requests failed: {failed[:5]}")
    return {"rps": len(latencies) / (last[0] - start), "latencies": latencies}


def measure(name: str, model: Path, texts: list[str], args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """One model: processes per request, then rounds of (ceiling, and per client count: in process, served)."""
    import torch

    from ner_app.predict.loading import load_predictor

    print(f"{name}: one predict process per request ...", file=sys.stderr, flush=True)
    result: dict[str, Any] = {"model": name, "path": str(model)}
    result["per_process"] = per_process(model, texts, args.threads, args.process_runs)
    torch.set_num_threads(args.threads)
    predictor = load_predictor(model, threads=args.threads)  # an export or an ONNX folder (fp32, int8)
    extra = ["--max-batch-size", str(args.max_batch_size)] if args.max_batch_size else []
    proc, port = start_server(model, args.threads, tmp / "serve.log", *extra)
    try:
        list(predictor.predict_texts(texts[:64]))  # warm-up, both
        load(port, texts, 8, 2.0)
        result["rounds"] = []
        for r in range(args.rounds):
            print(f"{name}: round {r + 1} of {args.rounds} ...", file=sys.stderr, flush=True)
            found: dict[str, Any] = {
                "load": os.getloadavg()[0],
                "ceiling": all_at_once(predictor, texts),
                "grouped": {},
                "served": {},
            }
            for clients in args.clients:
                found["grouped"][clients] = grouped(predictor, texts, clients, args.seconds)
                found["served"][clients] = load(port, texts, clients, args.seconds)
            result["rounds"].append(found)
    finally:
        proc.send_signal(signal.SIGTERM)
        result["exit_code"] = proc.wait(timeout=120)
    return result


def rows(result: dict[str, Any], clients: list[int]) -> list[list[object]]:
    rounds = result["rounds"]
    top = statistics.median(r["ceiling"] for r in rounds)
    process = statistics.median(result["per_process"])
    out: list[list[object]] = [
        [
            result["model"],
            "one `predict` process per request",
            1,
            f"{1 / process:.2f}",
            f"{process * 1000:.0f}",
            f"{max(result['per_process']) * 1000:.0f}",
            f"{100 / process / top:.2g}%",
        ],
        [
            result["model"],
            "in process, all sentences in one call (the ceiling)",
            "-",
            f"{top:.1f}",
            "-",
            "-",
            "100%",
        ],
    ]
    for c in clients:
        alone = statistics.median(r["grouped"][c] for r in rounds)
        served = statistics.median(r["served"][c]["rps"] for r in rounds)
        ordered = sorted(t for r in rounds for t in r["served"][c]["latencies"])
        p50, p99 = ordered[len(ordered) // 2], ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
        out.append(
            [
                result["model"],
                f"in process, {c} sentence{'s' * (c > 1)} a call",
                "-",
                f"{alone:.1f}",
                "-",
                "-",
                f"{100 * alone / top:.0f}%",
            ]
        )
        out.append(
            [
                result["model"],
                "`serve`",
                c,
                f"{served:.1f}",
                f"{p50 * 1000:.0f}",
                f"{p99 * 1000:.0f}",
                f"{100 * served / top:.0f}%",
            ]
        )
    return out


def _plain(value: Any) -> Any:
    """An argument as JSON holds it: paths (and lists of them) as strings."""
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return str(value) if isinstance(value, Path) else value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add(
        "--sizes",
        default="shipped,shipped-bilm,original",
        help="comma-separated: shipped, shipped-bilm, original",
    )
    add(
        "--model",
        type=Path,
        action="append",
        help="the model of the shipped row (default: the shipped tagger, data/models/conll2003); an export or an "
        "ONNX folder; repeat it for one row each, measured in turn",
    )
    add("--clients", default="1,8,32")
    add("--seconds", type=float, default=8.0, help="seconds of each in-process and served measurement")
    add("--rounds", type=int, default=2)
    add("--max-batch-size", type=int, help="serve --max-batch-size (default: serve's)")
    add("--sentences", type=int, default=256, help="dev sentences sampled")
    add("--process-runs", type=int, default=3)
    add("--threads", type=int, default=1, help="torch threads of the server's worker and of the ceiling")
    add("--out", type=Path, help="a folder for table.md and results.json")
    args = parser.parse_args()
    args.clients = [int(c) for c in args.clients.split(",")]
    if not DEV.is_file():
        print(f"{DEV} not found (set NER_SHARED to the shared data folder); skipped")
        return
    texts = dev_sentences(args.sentences)
    load_before = os.getloadavg()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes.split(","):
            folder = Path(tmp) / size
            if size == "shipped":
                for model in args.model or [SHIPPED_MODEL]:
                    if not model.is_dir():
                        print(f"{model} not found: the shipped tagger is skipped", file=sys.stderr)
                        continue
                    name = "shipped tagger (no ELMo)" if model == SHIPPED_MODEL else f"{model.name} ({model})"
                    (Path(tmp) / model.name).mkdir(exist_ok=True)
                    results.append(measure(name, model, texts, args, Path(tmp) / model.name))
                continue
            elif size == "shipped-bilm":
                model, name = stand_in(size, folder), "shipped biLM (ELMo tagger)"
            else:
                model, name = stand_in(size, folder), "original-size biLM (random weights)"
            folder.mkdir(exist_ok=True)
            results.append(measure(name, model, texts, args, folder))
    header = ["model", "how", "clients", "requests/s", "p50 ms", "p99 ms", "of the ceiling"]
    table = [row for result in results for row in rows(result, args.clients)]
    note = (
        f"{machine()}; load average {load_before[0]:.1f} before, {os.getloadavg()[0]:.1f} after; "
        f"{len(texts)} dev sentences, one a request; serve --threads {args.threads}"
        f"{f' --max-batch-size {args.max_batch_size}' if args.max_batch_size else ''}"
    )
    print(note)
    print_table(header, table, left=2)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        lines = [f"{note}\n", "| " + " | ".join(header) + " |", "|---|---|" + "---:|" * 5]
        lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in table]
        write_text(args.out / "table.md", "\n".join(lines) + "\n")
        options = {key: _plain(value) for key, value in vars(args).items()}
        write_text(
            args.out / "results.json", json.dumps({"note": note, "args": options, "results": results}) + "\n"
        )


if __name__ == "__main__":
    main()
