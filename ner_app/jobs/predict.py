"""``predict``: text or CoNLL tokens read, tagged by an export (in this process or in worker processes) and
written in a ``--format`` of ``report/formats.py``, to standard output or at once to ``--output``."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ner_app.errors import NerAppError
from ner_app.jobs.input_files import is_many
from ner_app.jobs.predict_job import PredictJob
from ner_app.jobs.setup import model_path

if TYPE_CHECKING:
    from ner_app.files import Claim
    from ner_app.report.format_types import OutputFormat


def _check_predict_output(output: str, source: str, fmt: OutputFormat, claim: Claim) -> None:
    """Before the model loads: --output is not the input (nor a folder holding it), and predict may write it
    (the output policy of ``files.py``: a file or folder predict wrote and nobody changed since, or
    --overwrite; into an existing folder a folder format writes only its own files)."""
    from ner_app.files import STDOUT, claim_file, claim_folder

    out = Path(output)
    if source != "-" and Path(source).exists():
        inside = out.resolve() == Path(source).resolve() or out.resolve() in Path(source).resolve().parents
        if inside:
            raise NerAppError(f"--output {output}: is the input (or holds it); name another path")
    if fmt.files is not None:
        if output == STDOUT:
            raise NerAppError(f"--format {fmt.name} writes a folder of files; --output names a folder, not -")
        claim_folder(
            out, dataclasses.replace(claim, overwrite=True)
        )  # what it replaces: checked file by file
    else:
        claim_file(output, claim)


def run_predict(args: PredictJob) -> int:
    """Tag ``args.input`` with the export and write ``args.format`` to standard output, or to ``args.output``
    at once (in ``args.workers`` processes when more than 1)."""
    from ner_app.report.formats import (
        ALTERNATIVES,
        FLAGGED,
        Target,
        output_format,
        refuse_unheld,
        write_output,
    )
    from ner_app.report.predictions_html import entity_types
    from ner_app.text.lines import decoded_lines

    fmt = output_format(args.format)
    many = args.shard is not None or is_many(args.input)  # a folder or a pattern: jobs/predict_folder.py
    if fmt.files is not None and args.output is None:
        raise NerAppError(f"--format {fmt.name} writes a folder of files: name it with --output DIR")
    claim = args.claim
    if args.output is not None and not many:
        _check_predict_output(args.output, args.input, fmt, claim)
    from ner_app.text.readings import ReadingOptions

    options = ReadingOptions(args.min_score, args.alternatives, args.flag_missed)
    if fmt.reads == "conll" and options != ReadingOptions():
        raise NerAppError(
            f"--min-score, --alternatives and --flag-missed report on entities: they go with --format jsonl or "
            f"html, not {args.format}"
        )
    refuse_unheld(fmt, {ALTERNATIVES: options.alternatives > 0, FLAGGED: options.flag_missed is not None})
    if many:
        from ner_app.jobs.predict_folder import run_predict_folder

        return run_predict_folder(args, fmt, options)
    model = model_path(args.model)
    if args.workers is not None and args.workers > 1:  # N processes: jobs/predict_workers.py
        from ner_app.jobs.predict_workers import predict_in_workers

        return predict_in_workers(args, fmt, str(model), options)  # the model only in the workers
    from ner_app.predict.loading import load_predictor
    from ner_app.predict.tag_conll import tag_conll
    from ner_app.text.reliability import note_uncalibrated

    predictor = load_predictor(model, args.device, args.batch_size, args.max_tokens, args.threads)
    note_uncalibrated(predictor.calibrated, str(model))
    name = "<stdin>" if args.input == "-" else args.input
    if args.input != "-" and Path(args.input).is_dir():
        raise NerAppError(f"--input {args.input}: is a folder, expected a text file or -")
    from ner_app.tagger.version import model_version

    target = Target(tuple(entity_types(predictor.tags.itos)), name, model_version(model))
    source = sys.stdin.buffer if args.input == "-" else open(args.input, "rb")  # noqa: SIM115
    with source:
        lines = decoded_lines(source, name)  # split on \n only: one output per input line
        records = (
            tag_conll(predictor, lines)
            if fmt.reads == "conll"
            else predictor.tag_lines(lines, options=options)
        )
        if args.output is not None:
            write_output(args.output, fmt, records, target, claim)
            print(f"wrote {args.output}", file=sys.stderr)
            return 0
        for piece in fmt.write(records, target):
            sys.stdout.write(piece)
    return 0
