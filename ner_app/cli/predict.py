"""``predict``: raw text or CoNLL tokens tagged by an export and written in a ``--format`` (the work:
``jobs/predict.py``)."""

from __future__ import annotations

import argparse

from ner_app.cli.arguments import (
    Owned,
    add_model_arguments,
    add_overwrite_argument,
    nonnegative_int,
    positive_int,
    probability,
)
from ner_app.jobs.input_files import Shard, parse_shard
from ner_app.report.formats import format_help, format_names


def add_parser(commands: argparse._SubParsersAction) -> None:
    predict = commands.add_parser(
        "predict",
        help="tag raw text (JSON lines with character offsets) or CoNLL tokens with an exported model",
        description="jsonl: each input line is tokenised like CoNLL-2003 and gives one JSON object "
        '{"text", "entities": [{"start", "end", "type", "text", "score"}]} with line[start:end] == text. '
        "conll: one token per line (first column), blank line between sentences; the predicted tag is appended.",
    )
    predict.add_argument(
        "--input",
        required=True,
        help="a file, - for standard input, a folder (every file under it but hidden ones) or a quoted glob "
        "pattern ('texts/**/*.txt'): one output per file into the folder --output names, or with --format jsonl "
        "one JSONL naming each line's file",
    )
    predict.add_argument("--format", default="jsonl", choices=format_names(), help=format_help())
    predict.add_argument(
        "--output",
        metavar="PATH",
        help="write here instead of standard output, at once by an atomic rename (a folder for --format brat, "
        "and for a folder input: a re-run skips the files already done)",
    )
    predict.add_argument(
        "--shard",
        type=_shard,
        metavar="I/N",
        help="of a folder or pattern input, tag only the I-th of N shares of the files (chosen by a hash of each "
        "file's relative path: adding a file moves no other), so N machines can share the work",
    )
    predict.add_argument(
        "--min-score",
        type=probability,
        default=0.0,
        metavar="S",
        help="leave out entities whose score (the probability of the entity) is below S (default %(default)s)",
    )
    predict.add_argument(
        "--alternatives",
        type=nonnegative_int,
        default=0,
        metavar="K",
        help='give each entity its K most probable other readings that overlap it ("alternatives": another '
        "type and/or boundaries moved by at most 2 tokens), each with its probability",
    )
    predict.add_argument(
        "--flag-missed",
        type=probability,
        metavar="P",
        help='flag the tokens tagged O whose probability of O is below P ("flagged"), each with the most '
        "probable entity reading that covers it",
    )
    predict.add_argument(
        "--workers",
        type=positive_int,
        metavar="N",
        help="tag in N worker processes (each loads the model once, 1 torch thread unless --threads); the output "
        "is the same as one process's, in input order, and is written once all of it is done (at most one "
        "worker per CPU core)",
    )
    add_overwrite_argument(predict)
    add_model_arguments(
        predict,
        Owned("ner_app.text.batching", "PREDICT_BATCH_SIZE"),
        "padded tokens a batch holds at most: pieces x longest piece (sentences are tagged in pieces of at most 250 "
        "tokens; default %(default)s)",
    )


def _shard(text: str) -> Shard:
    """argparse type of --shard."""
    try:
        return parse_shard(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def run(args: argparse.Namespace) -> int:
    from ner_app.jobs.predict import run_predict
    from ner_app.jobs.predict_job import PredictJob

    return run_predict(
        PredictJob(
            input=args.input,
            format=args.format,
            output=args.output,
            min_score=args.min_score,
            alternatives=args.alternatives,
            flag_missed=args.flag_missed,
            workers=args.workers,
            model=args.model,
            batch_size=args.batch_size,
            max_tokens=args.max_tokens,
            threads=args.threads,
            device=args.device,
            overwrite=args.overwrite,
            shard=args.shard,
        )
    )
