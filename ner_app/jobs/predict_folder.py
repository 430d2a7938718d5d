"""``predict --input FOLDER`` (or a quoted glob pattern), optionally ``--shard I/N``: every file tagged as
``predict --input FILE`` tags it, one output per input under ``--output OUTDIR`` (``folder_outputs.py``), or
one JSONL whose every object names its ``"file"`` (``--output FILE.jsonl``, or standard output).

Each file is tagged alone, with the same code as one file, so its output is byte for byte what ``predict --input``
writes for it, whichever shard or worker tags it; ``--workers N`` hands whole files to the workers. Outputs that
are done are skipped, so an interrupted run resumes, and N shards into the same folder make what one run makes.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ner_app.errors import NerAppError, raise_if_stopped
from ner_app.files import atomic_path, claim_file
from ner_app.jobs.folder_outputs import (
    Identity,
    Writer,
    claim_outputs,
    done,
    output_name,
    write_manifest,
    write_one,
)
from ner_app.jobs.input_files import InputFile, list_inputs
from ner_app.jobs.predict_job import PredictJob
from ner_app.limits import MAX_PREDICT_FILE_BYTES
from ner_app.text.lines import decoded_lines
from ner_app.text.outputs import OutputFormat, Target, json_line
from ner_app.text.readings import ReadingOptions

Rendered = str | list[tuple[str, str]]  # a file format's text, or a folder format's (name, text) pairs


def read_input(item: InputFile) -> list[str]:
    """The lines of one input, read as ``predict --input FILE`` reads them (split on ``\\n``, UTF-8 or one
    line naming the file and line), whole: at most ``MAX_PREDICT_FILE_BYTES``."""
    with open(item.path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size > MAX_PREDICT_FILE_BYTES:
            raise NerAppError(
                f"{item.path}: {size:,} bytes, more than the {MAX_PREDICT_FILE_BYTES:,} a file of a folder input "
                "may hold; tag it alone with --input FILE"
            )
        return list(decoded_lines(f, str(item.path)))


def render(
    predictor: Any,
    lines: list[str],
    fmt: OutputFormat,
    target: Target,
    options: ReadingOptions,
    file_key: str | None = None,
) -> Rendered:
    """One file's output: ``fmt``'s text or files, or (``file_key``) JSON lines that each name the file."""
    if fmt.reads == "conll":
        from ner_app.predict.predictor import tag_conll

        records: Any = tag_conll(predictor, lines)
    else:
        records = predictor.tag_lines(lines, options=options)
    if file_key is not None:
        return "".join(json_line({"file": file_key, **record.to_json()}) for record in records)
    if fmt.files is not None:
        return list(fmt.files(records, target))
    return "".join(fmt.write(records, target))


def _render_in_worker(task: tuple[list[str], str, Target, ReadingOptions, str | None]) -> Rendered:
    """A worker's task (``predict/workers.py``): one whole file, rendered with the worker's loaded export."""
    from ner_app.predict.workers import worker_predictor
    from ner_app.report.formats import output_format

    lines, fmt, target, options, file_key = task
    return render(worker_predictor(), lines, output_format(fmt), target, options, file_key)


@dataclass
class Tally:
    """What was done, for the closing line."""

    files: int = 0
    lines: int = 0
    words: int = 0

    def add(self, lines: list[str]) -> list[str]:
        self.files, self.lines = self.files + 1, self.lines + len(lines)
        self.words += sum(len(line.split()) for line in lines)
        return lines


def _inside(inner: Path, outer: Path) -> bool:
    return inner == outer or outer in inner.parents


def _check_paths(source: str, output: str | None) -> Path | None:
    """--output is neither the input folder, nor inside it (a second run would tag the outputs), nor holds it;
    returns the resolved output (a pattern leaves out what is under it)."""
    if output is None or output == "-":
        return None
    out, folder = Path(output).resolve(), Path(source)
    if folder.is_dir() and (_inside(out, folder.resolve()) or _inside(folder.resolve(), out)):
        raise NerAppError(
            f"--output {output}: is the input folder, inside it or holds it (a second run would tag the outputs); "
            "name a path outside it"
        )
    return out


def _check_inputs(files: list[InputFile]) -> None:
    """A file that is not UTF-8 or too large is one line before anything is written (reading is fast next to
    tagging)."""
    for item in files:
        read_input(item)


def _combined(fmt: OutputFormat, output: str | None) -> bool:
    """Whether the files go into one JSONL (each object naming its file) rather than a folder of outputs."""
    if fmt.name != "jsonl" or (output is not None and Path(output).is_dir()):
        return False
    return output is None or output == "-" or output.endswith(".jsonl") or Path(output).exists()


def run_predict_folder(args: PredictJob, fmt: OutputFormat, options: ReadingOptions) -> int:
    """Tag the files of the folder or pattern ``args.input`` (``args.shard``'s share) into ``args.output``."""
    if not Path(args.input).is_dir() and (args.input == "-" or Path(args.input).exists()):
        raise NerAppError(
            f"--shard splits the files of a folder or a glob pattern; --input {args.input} is one file: tag it "
            "whole, or split it into files first"
        )
    combined = _combined(fmt, args.output)
    if not combined and args.output in (None, "-"):
        raise NerAppError(
            f"--input {args.input}: a folder input gives one --format {fmt.name} output per file; name a folder "
            "for them with --output DIR (--format jsonl alone can write them all as one JSONL)"
        )
    leave_out = _check_paths(args.input, args.output)
    files = list_inputs(args.input, leave_out)
    mine = [f for f in files if args.shard is None or args.shard.holds(f.relative)]
    share = f" (shard {args.shard}: {len(mine)} of {len(files)})" if args.shard else ""
    if combined:
        _check_inputs(mine)
        return _write_combined(args, fmt, options, mine, share)
    from ner_app.jobs.setup import model_path
    from ner_app.tagger.version import model_version, recorded_weights_sha256

    model = model_path(args.model)
    spec = model / "tagger.json"
    identity = Identity(
        model_version(model) if spec.is_file() else str(model),
        recorded_weights_sha256(spec) if spec.is_file() else None,
        fmt.name,
        options.min_score,
        options.alternatives,
        options.flag_missed,
    )
    assert args.output is not None
    folder = Path(args.output)
    resume = claim_outputs(folder, identity, args.overwrite, f"--output {args.output}")
    todo = [f for f in mine if not (resume and done(folder, output_name(f.relative, fmt.name)))]
    skipped = len(mine) - len(todo)
    _check_inputs(todo)
    start, tally = time.perf_counter(), Tally()
    if not todo:
        write_manifest(folder, identity)
    else:
        with Writer() as writer:
            for item, rendered in _tagged(
                args, fmt, options, todo, tally, False, lambda: write_manifest(folder, identity)
            ):
                writer.submit(write_one, folder, output_name(item.relative, fmt.name), rendered)
    _summary(tally, time.perf_counter() - start, f"{skipped} already done{share}; outputs in {folder}")
    return 0


def _write_combined(
    args: PredictJob, fmt: OutputFormat, options: ReadingOptions, mine: list[InputFile], share: str
) -> int:
    output = args.output or "-"
    if output != "-":
        claim_file(output, args.claim)
    start, tally = time.perf_counter(), Tally()
    encoding = "utf-8" if output != "-" else (sys.stdout.encoding or "utf-8")
    claim = args.claim if output != "-" else None
    with atomic_path(output, claim) as tmp, open(tmp, "w", encoding=encoding, newline="") as out:
        for _, rendered in _tagged(args, fmt, options, mine, tally, True, lambda: None):
            assert isinstance(rendered, str)
            out.write(rendered)
    where = "" if output == "-" else f"; wrote {output}"
    _summary(tally, time.perf_counter() - start, f"one JSONL{share}{where}")
    return 0


def _summary(tally: Tally, seconds: float, rest: str) -> None:
    rate = (
        f"{tally.files / seconds:,.1f} files/s, {tally.words / seconds:,.0f} words/s" if seconds > 0 else ""
    )
    print(
        f"predict: tagged {tally.files:,} files ({tally.lines:,} lines, {tally.words:,} words) in {seconds:.1f} s"
        f"{' (' + rate + ')' if tally.files and rate else ''}; {rest}",
        file=sys.stderr,
    )


def _tagged(
    args: PredictJob,
    fmt: OutputFormat,
    options: ReadingOptions,
    todo: list[InputFile],
    tally: Tally,
    named: bool,
    loaded: Callable[[], None],
) -> Iterator[tuple[InputFile, Rendered]]:
    """Each file of ``todo`` with its output, in order, tagged in this process or by ``args.workers``
    workers; ``loaded()`` is called once the model is loaded, before the first output (``named``: JSON lines
    naming the file). A progress line per 10% of the files on stderr (a bar on a terminal)."""
    from ner_app.progress import progress_bar
    from ner_app.tagger.version import model_version
    from ner_app.text.tags import entity_types

    if args.workers is not None and args.workers > 1:
        from ner_app.jobs.predict_workers import worker_count
        from ner_app.jobs.setup import model_path
        from ner_app.predict.workers import WorkerPool

        if args.device != "cpu":
            raise NerAppError("--workers runs processes on CPU cores; leave it out with --device cuda")
        model = model_path(args.model)
        workers = worker_count(args.workers)
        with WorkerPool(
            workers, str(model), args.device, args.batch_size, args.max_tokens, args.threads or 1
        ) as pool:
            found = pool.describe()
            types, version = tuple(entity_types(list(found.tags))), model_version(model)
            loaded()
            tasks = (
                (
                    tally.add(read_input(f)),
                    fmt.name,
                    Target(types, f.relative, version),
                    options,
                    f.relative if named else None,
                )
                for f in todo
            )
            bar = progress_bar(len(todo), "predict", unit="files")
            try:
                for item, rendered in zip(todo, pool.ordered(_render_in_worker, tasks), strict=True):
                    yield item, rendered
                    bar.update(1)
            finally:
                bar.close()
        return
    predictor, version = _load(args)
    types = tuple(entity_types(predictor.tags.itos))
    loaded()
    bar = progress_bar(len(todo), "predict", unit="files")
    try:
        for item in todo:
            raise_if_stopped()
            lines = tally.add(read_input(item))
            target = Target(types, item.relative, version)
            yield item, render(predictor, lines, fmt, target, options, item.relative if named else None)
            bar.update(1)
    finally:
        bar.close()


def _load(args: PredictJob) -> tuple[Any, str]:
    """The model (an export or an ONNX folder) loaded in this process, as ``jobs/predict.py`` loads it, and
    its version name."""
    from ner_app.jobs.setup import model_path
    from ner_app.predict.loading import load_predictor
    from ner_app.tagger.version import model_version
    from ner_app.text.reliability import note_uncalibrated

    model = model_path(args.model)
    predictor = load_predictor(model, args.device, args.batch_size, args.max_tokens, args.threads)
    note_uncalibrated(predictor.calibrated, str(model))
    return predictor, model_version(model)
