"""Ray Data (``ner_app.onnx.ray_batch``, N actors) against ``predict --workers N``, side by side, on raw text.

    nice python -m benchmarks.ray_predict [--actors 2] [--lines 0] [--copies 1] [--rounds 1]

The input is the CoNLL-2003 dev sentences detokenised into raw text lines (../shared; without it the tiny
corpus's sentences paired into longer lines), cut to ``--lines`` (0: all). The shipped tagger
(data/models/conll2003) is exported to ONNX, fp32 and int8, in a temporary folder. Timed, in turn, ``--rounds``
times: ``predict --workers N`` (the torch export, whole process, start-up included) and the Ray pipeline on a
local Ray of N CPUs (read, tag with N actors, write JSON lines) for each ONNX export; each also on one line (its
start-up: processes or actors starting and loading the model), so that the speed without start-up is the
difference. Ray's own start-up (``ray.init`` of a local cluster, then the session's first dataset, which starts
Ray's worker processes) is timed apart, once. Prints the median wall
seconds, lines/s with and without start-up, and how many lines' entities equal predict's (fp32: the same
entities, scores within 2e-4; int8 is another model, rounded into agreement); also the load average at the
start and the end: on a busy machine every run shares the cores.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.common import ROOT, SHARED, cpu_name, print_table
from ner_app.onnx import ray_batch
from ner_app.onnx.export import export_onnx_from
from ner_app.text.conll import read_conll

SHIPPED = ROOT / "data" / "models" / "conll2003"


def detokenised(tokens: list[str]) -> str:
    """CoNLL tokens as a line of raw text: no space before closing punctuation and clitics, none after an
    opening bracket (the tokeniser splits them off again)."""
    text = " ".join(tokens)
    text = re.sub(r" ([.,;:!?%)\]}]|'s|n't|'re|'ve|'ll|'d|'m)(?= |$)", r"\1", text)
    return re.sub(r"([(\[{$]) ", r"\1", text)


def input_lines(limit: int, copies: int) -> tuple[list[str], str]:
    dev = SHARED / "data" / "conll2003" / "valid.txt"
    if dev.is_file():
        lines = [detokenised(s.tokens) for s in read_conll(dev) if s.tokens != ["-DOCSTART-"]]
        source = str(dev)
    else:
        tiny = [
            detokenised(s.tokens) for s in read_conll(ROOT / "tests" / "data" / "tiny_conll" / "train.txt")
        ]
        lines = [f"{a} {b}" for a in tiny for b in tiny] * 20
        source = "tests/data/tiny_conll (pairs of sentences; ../shared has no CoNLL-2003)"
    lines = lines * copies
    return (lines[:limit] if limit else lines), (f"{source}, {copies} copies" if copies > 1 else source)


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def predict_workers(source: Path, workers: int) -> list[dict[str, Any]]:
    command = [sys.executable, "-m", "ner_app", "predict", "--format", "jsonl", "--workers", str(workers)]
    done = subprocess.run([*command, "--input", str(source)], capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"predict --workers: {done.stderr[-800:]}")
    return [json.loads(line) for line in done.stdout.splitlines()]


def ray_run(source: Path, model: Path, out: Path, actors: int) -> list[dict[str, Any]]:
    dataset = ray_batch.predict_dataset(str(source), model, actors=actors)
    ray_batch.write_predictions(dataset, out, overwrite=True)
    rows = [json.loads(line) for f in out.glob("*.json") for line in f.read_text("utf-8").split("\n") if line]
    return sorted(rows, key=lambda r: r["line"])


def agreeing(rows: list[dict[str, Any]], expected: list[dict[str, Any]], tolerance: float) -> int:
    """Lines whose entities equal predict's, scores within ``tolerance``."""

    def key(entities: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        return [(e["start"], e["end"], e["type"]) for e in entities]

    return sum(
        key(r["entities"]) == key(e["entities"])
        and all(
            abs(a["score"] - b["score"]) <= tolerance
            for a, b in zip(r["entities"], e["entities"], strict=True)
        )
        for r, e in zip(rows, expected, strict=True)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--actors", type=int, default=2, help="Ray actors and predict --workers, and Ray's CPUs"
    )
    parser.add_argument("--lines", type=int, default=0, help="input lines (0: every dev sentence)")
    parser.add_argument("--copies", type=int, default=1, help="the dev sentences repeated this many times")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    import ray

    lines, source_name = input_lines(args.lines, args.copies)
    print(
        f"# Ray Data vs predict --workers: {len(lines):,} lines ({source_name}), {args.actors} actors/workers, "
        f"CPU {cpu_name()}, {os.cpu_count()} cores, ray {ray.__version__}"
    )
    print(f"load average at the start: {load()}\n")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        source, one = tmp / "in.txt", tmp / "one.txt"
        source.write_text("\n".join(lines) + "\n", encoding="utf-8")
        one.write_text(lines[0] + "\n", encoding="utf-8")
        models = {"fp32": tmp / "onnx", "int8": tmp / "onnx_int8"}
        for quantize, folder in models.items():
            export_onnx_from(SHIPPED, folder, None if quantize == "fp32" else "int8")
        ray_start = timed(
            lambda: ray.init(
                num_cpus=args.actors,
                include_dashboard=False,
                log_to_driver=False,
                _node_ip_address="127.0.0.1",
            )
        )
        # the first dataset of a session also starts Ray's worker processes and its coordinating actors: Ray's
        # start-up too, not the start-up of a pipeline run
        first_dataset = timed(lambda: ray.data.range(4).map_batches(lambda b: b).materialize())
        runs: dict[str, Callable[[Path], list[dict[str, Any]]]] = {
            f"predict --workers {args.actors} (torch)": lambda path: predict_workers(path, args.actors)
        }
        for quantize, folder in models.items():
            runs[f"Ray Data, {args.actors} actors, ONNX {quantize}"] = lambda path, m=folder: ray_run(
                path, m, tmp / "out", args.actors
            )
        walls: dict[str, list[float]] = {name: [] for name in runs}
        start_ups: dict[str, list[float]] = {name: [] for name in runs}
        outputs: dict[str, list[dict[str, Any]]] = {}
        try:
            for _ in range(args.rounds):
                for name, run in runs.items():
                    start_ups[name].append(timed(lambda run=run: run(one)))
                    start = time.perf_counter()
                    outputs[name] = run(source)
                    walls[name].append(time.perf_counter() - start)
        finally:
            ray.shutdown()
    reference = next(iter(outputs.values()))
    rows = []
    for name, wall in walls.items():
        median, up = statistics.median(wall), statistics.median(start_ups[name])
        tolerance = 2e-4 if "int8" not in name else 1.0  # int8: the same entities, whatever their scores
        rows.append(
            [
                name,
                f"{median:.1f}",
                f"{len(lines) / median:,.0f}",
                f"{up:.1f}",
                f"{len(lines) / (median - up):,.0f}" if median > up else "n/a (input too small)",
                f"{agreeing(outputs[name], reference, tolerance):,} / {len(lines):,}",
                len(wall),
            ]
        )
    print_table(
        [
            "run",
            "median wall s",
            "lines/s",
            "start-up s (1 line)",
            "lines/s without start-up",
            "lines with predict's entities",
            "runs",
        ],
        rows,
    )
    print(
        f"\nRay start-up, once: ray.init of a local cluster of {args.actors} CPUs {ray_start:.1f} s, then the "
        f"session's first (empty) dataset {first_dataset:.1f} s"
    )
    print(f"load average at the end: {load()}")


if __name__ == "__main__":
    main()
