"""Prediction with different input features side by side in one run: words/s, load seconds and peak memory.

    python -m benchmarks.encoder_speed --models data/models/conll2003 runs/minilm/s1/export [--threads 1]
        [--sentences 1000] [--rounds 3]

Each model runs in its own worker process, the models alternated in every round so that a busy machine slows
them alike. A worker loads the export (``Predictor.from_export``), tags the sentences once to warm up, then
once timed (``Predictor.tag``, torch at ``--threads``), and reports its peak resident memory (``ru_maxrss``).
The sentences are the first ``--sentences`` of CoNLL-2003 dev (``../shared``), else the tiny corpus. Medians
over the rounds; the ratio is each model's words/s over the first model's.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.predict_speed import read_sentences

ROOT = Path(__file__).resolve().parents[1]


def worker(model: str, sentences_file: str, threads: int) -> None:
    """Load, warm up, tag once timed; print one JSON line."""
    import torch

    from ner_app.predict.predictor import Predictor

    torch.set_num_threads(threads)
    sentences = json.loads(Path(sentences_file).read_text(encoding="utf-8"))
    start = time.perf_counter()
    predictor = Predictor.from_export(model)
    loaded = time.perf_counter() - start
    predictor.tag(sentences)
    start = time.perf_counter()
    predictor.tag(sentences)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux -> MiB
    words = sum(len(s) for s in sentences)
    print(json.dumps({"load": loaded, "words_per_s": words / seconds, "peak_mib": peak}))


def measure(model: Path, sentences_file: Path, threads: int) -> dict[str, float]:
    command = [
        sys.executable,
        "-m",
        "benchmarks.encoder_speed",
        "--worker",
        str(model),
        str(sentences_file),
        str(threads),
    ]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    if done.returncode:
        raise SystemExit(f"{model}: the worker failed:\n{done.stderr[-3000:]}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--worker"]:
        worker(args[1], args[2], int(args[3]))
        return 0
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--models", type=Path, nargs="+", required=True, help="exports, the first the reference"
    )
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    options = parser.parse_args(args)
    sentences, source = read_sentences(options.sentences)
    runs: dict[Path, list[dict[str, float]]] = {m: [] for m in options.models}
    with tempfile.TemporaryDirectory() as tmp:
        sentences_file = Path(tmp) / "sentences.json"
        sentences_file.write_text(json.dumps(sentences), encoding="utf-8")
        for _ in range(options.rounds):
            for model in options.models:
                runs[model].append(measure(model, sentences_file, options.threads))
    words = sum(len(s) for s in sentences)
    print(
        f"{len(sentences)} sentences ({words} words) of {source}, {options.threads} thread(s), medians of {options.rounds} rounds\n"
    )
    print("| model | words/s | ratio | load s | peak MiB |\n|---|---:|---:|---:|---:|")
    first = statistics.median(r["words_per_s"] for r in runs[options.models[0]])
    for model, results in runs.items():
        rate = statistics.median(r["words_per_s"] for r in results)
        load = statistics.median(r["load"] for r in results)
        peak = statistics.median(r["peak_mib"] for r in results)
        print(f"| {model} | {rate:,.0f} | {rate / first:.3f} | {load:.2f} | {peak:,.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
