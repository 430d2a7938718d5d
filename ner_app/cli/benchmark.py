"""``ner-app benchmark speed``: a tagger's words per second with a 95% bootstrap interval (``predict/speed.py``),
on the torch path (an export folder) or the ONNX path (an ``export --onnx`` folder, fp32 or int8)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from ner_app.cli.arguments import Owned, positive_int
from ner_app.errors import NerAppError
from ner_app.limits import MAX_BENCHMARK_BATCHES

PATHS = ("torch", "onnx", "int8")
MAX_INPUT_BYTES = 256 << 20  # the input is read whole (its sentences are cycled): bounded


def add_parser(commands: argparse._SubParsersAction) -> None:
    benchmark = commands.add_parser(
        "benchmark", help="measure a tagger: benchmark speed (words/s with a 95%% confidence interval)"
    )
    kinds = benchmark.add_subparsers(dest="benchmark", metavar="WHAT", required=True)
    speed = kinds.add_parser(
        "speed",
        help="words per second of a tagger on a text file, 95%% bootstrap interval over batches",
        description="Tokenises the lines of --input as predict does, then tags --batch-size sentences at a time: "
        "--warmup batches untimed, then --batches timed ones (the input cycled when shorter). Prints the mean "
        "words/s over batches and its 95%% bootstrap confidence interval (docs/performance.md).",
    )
    speed.add_argument(
        "--model",
        help="an export folder (torch) or an export --onnx folder (onnx, int8); default: the shipped tagger",
    )
    speed.add_argument("--input", required=True, help="a UTF-8 text file, one text a line")
    speed.add_argument(
        "--path",
        choices=PATHS,
        help="torch: the export with torch; onnx, int8: an ONNX folder with fp32 or int8 graphs (default: what "
        "--model holds)",
    )
    speed.add_argument("--batches", type=positive_int, default=50, help="timed batches (default %(default)s)")
    speed.add_argument(
        "--warmup", type=int, default=3, help="batches run first and left out (default %(default)s)"
    )
    speed.add_argument(
        "--batch-size",
        type=positive_int,
        default=Owned("ner_app.text.batching", "PREDICT_BATCH_SIZE"),
        help="sentences handed to the tagger at a time, which batches them by length (default %(default)s)",
    )
    speed.add_argument("--threads", type=positive_int, default=1, help="CPU threads (default %(default)s)")


def _tagger(model: Path, path: str | None, threads: int) -> tuple[str, Any]:
    """(the path measured, its tag function) for the folder ``model`` (loaded by ``predict/loading.py``)."""
    from ner_app.onnx.predictor import OnnxPredictor
    from ner_app.predict.loading import load_predictor, model_kind

    if model_kind(model) == "onnx":
        onnx = load_predictor(model, threads=threads)
        assert isinstance(onnx, OnnxPredictor)
        found = "int8" if onnx.quantize == "int8" else "onnx"
        if path not in (None, found):
            raise NerAppError(
                f"--path {path}: {model} holds {'int8' if found == 'int8' else 'fp32'} ONNX graphs; name "
                f"--path {found}, or make the other with ner-app export --onnx"
                + (" --quantize int8" if path == "int8" else "")
            )
        return found, onnx.tag
    if path not in (None, "torch"):
        raise NerAppError(
            f"--path {path}: {model} is not an ONNX export (no onnx.json); make one with ner-app export --onnx "
            f"{'--quantize int8 ' if path == 'int8' else ''}--model {model} --output DIR"
        )
    predictor = load_predictor(model, threads=threads)  # torch's threads set there
    return "torch", lambda sentences: predictor.tag(sentences)


def run(args: argparse.Namespace) -> int:
    from ner_app.jobs.setup import model_path
    from ner_app.predict.speed import measure_speed
    from ner_app.text.lines import read_lines

    for option, value, low in (("--warmup", args.warmup, 0), ("--batches", args.batches, 1)):
        if not low <= value <= MAX_BENCHMARK_BATCHES:  # the bootstrap draws 1,000 x batches indices
            raise NerAppError(
                f"{option}: expected an integer in [{low}, {MAX_BENCHMARK_BATCHES:,}], found {value:,}"
            )
    source = Path(args.input)
    if not source.is_file():
        raise NerAppError(f"--input {source}: not a file (expected a UTF-8 text file)")
    if source.stat().st_size > MAX_INPUT_BYTES:
        raise NerAppError(f"--input {source}: larger than {MAX_INPUT_BYTES >> 20} MiB; use a sample of it")
    lines = read_lines(source, "the text to tag")
    model = model_path(args.model)
    path, tag = _tagger(model, args.path, args.threads)
    speed = measure_speed(tag, lines, args.batch_size, args.batches, args.warmup)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"{path} ({model}, {args.threads} thread(s), batches of {args.batch_size} sentences): {speed.line()}"
    )
    print(f"load average at the end: {load}", file=sys.stderr)
    return 0
