"""``predict --workers N``: the input tagged by N worker processes (``predict/workers.py``), the output written
as one process writes it, to standard output once all of it is done (``files.atomic_path``), so that a worker
that dies leaves nothing half-written."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any, BinaryIO

from ner_app.errors import NerAppError
from ner_app.files import atomic_path
from ner_app.jobs.predict_job import PredictJob
from ner_app.predict.workers import GroupTagger, WorkerPool, usable_cores
from ner_app.report.formats import OutputFormat, Target, write_output
from ner_app.report.predictions_html import entity_types
from ner_app.tagger.version import model_version
from ner_app.text.lines import decoded_lines
from ner_app.text.readings import ReadingOptions


def worker_count(asked: int, cores: int | None = None) -> int:
    """``--workers``, at most the usable cores: more processes than cores only add memory (each holds the
    model) and contention; the output is the same."""
    cores = usable_cores() if cores is None else cores
    if asked > cores:
        print(
            f"--workers {asked}: this machine lets predict use {cores} CPU core(s); running {cores} workers",
            file=sys.stderr,
        )
    return min(asked, cores)


def predict_in_workers(
    args: PredictJob, fmt: OutputFormat, model: str, options: ReadingOptions | None = None
) -> int:
    """Tag ``args.input`` with ``args.workers`` processes of the export ``model`` (with ``predict``'s reading
    ``options``) and write ``fmt`` to stdout, or to ``--output``."""
    if args.device != "cpu":
        raise NerAppError("--workers runs processes on CPU cores; leave it out with --device cuda")
    name = "<stdin>" if args.input == "-" else args.input
    if args.input != "-" and Path(args.input).is_dir():
        raise NerAppError(f"--input {args.input}: is a folder, expected a text file or -")
    source: BinaryIO = sys.stdin.buffer if args.input == "-" else open(args.input, "rb")  # noqa: SIM115
    with source:
        return _run(args, fmt, model, source, name, options)


def _run(
    args: PredictJob,
    fmt: OutputFormat,
    model: str,
    source: BinaryIO,
    name: str,
    options: ReadingOptions | None,
) -> int:
    assert args.workers is not None  # reached with --workers N, N > 1
    workers = worker_count(args.workers)
    with WorkerPool(workers, model, args.device, args.batch_size, args.max_tokens, args.threads or 1) as pool:
        found = pool.describe()
        target = Target(tuple(entity_types(list(found.tags))), name, model_version(Path(model)))
        lines = decoded_lines(source, name)
        records: Iterable[Any]
        if fmt.reads == "conll":
            from ner_app.predict.tag_conll import tag_conll

            records = tag_conll(GroupTagger(pool, found), lines)
        else:
            records = pool.tag_text(lines, options)
        if args.output is not None:  # at once, by an atomic rename, like one process
            write_output(args.output, fmt, records, target, args.claim)
            print(f"wrote {args.output}", file=sys.stderr)
            return 0
        encoding = sys.stdout.encoding or "utf-8"
        with atomic_path("-") as tmp, open(tmp, "w", encoding=encoding, newline="") as out:
            for piece in fmt.write(records, target):
                out.write(piece)
    return 0
