"""``select``: the sentences of a pool to annotate next (active learning; ``decisions/selection.py``,
``tagger/crf/uncertainty.py``), with the model's predictions in any predict format."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from ner_app.cli.arguments import Owned, add_model_arguments, add_overwrite_argument, output_claim
from ner_app.errors import NerAppError
from ner_app.report.formats import format_names

LINES = "lines"  # select's plain output: one selected sentence per line, no predictions
# as tagger/crf/uncertainty.py's STRATEGIES, in the order --help lists them
STRATEGY_NAMES = ("margin", "entropy", "least-confidence", "mnlp", "random")


def add_parser(commands: argparse._SubParsersAction) -> None:
    choose = commands.add_parser(
        "select",
        help="choose the K sentences of a pool to annotate next (active learning), with the model's predictions",
        description="Scores every sentence of a pool (raw text lines, or a CoNLL file) with the model and "
        "writes the K most uncertain, most uncertain first: least-confidence (1 - P(best path)), margin "
        "(P(best) - P(second-best path)), entropy (mean token entropy of the marginals), mnlp (log P(best path) "
        "per token) or random. The same pool, model and --seed give the same selection "
        "(docs/active_learning.md).",
    )
    choose.add_argument(
        "--input", required=True, help="the pool: a text file (one candidate per line) or CoNLL"
    )
    choose.add_argument("--k", metavar="N", help="how many sentences (text: lines) to select at most")
    choose.add_argument(
        "--tokens",
        metavar="N",
        help="a budget of tokens: the most uncertain candidates, in rank order, up to the first that would take "
        "their tokens over N (with --k, both limits hold); one of --k and --tokens is required",
    )
    choose.add_argument(
        "--strategy",
        default="margin",
        metavar="NAME",
        help=f"{', '.join(STRATEGY_NAMES)} (default %(default)s)",
    )
    choose.add_argument("--seed", default="0", help="orders ties, and the whole pool for random (default 0)")
    choose.add_argument("--output", required=True, help="the file to write (- for standard output)")
    add_overwrite_argument(choose)
    choose.add_argument(
        "--format",
        default=LINES,
        choices=[LINES, *format_names()],
        help="lines: the selected sentences, one per line, as in the pool (a CoNLL sentence's tokens joined by "
        "spaces); or any predict format, with the model's predictions (default %(default)s)",
    )
    choose.add_argument(
        "--order",
        default="rank",
        choices=["rank", "pool"],
        help="rank: most uncertain first (default); pool: in the pool's order",
    )
    choose.add_argument(
        "--pool-format",
        default="auto",
        choices=["auto", "text", "conll"],
        help="auto (default): CoNLL when the file starts with -DOCSTART- or every non-blank line ends in a tag",
    )
    add_model_arguments(
        choose,
        Owned("ner_app.text.batching", "PREDICT_BATCH_SIZE"),
        "padded tokens a batch holds at most, as predict's (default %(default)s)",
    )


def _integer(text: str, option: str, low: int | None = None) -> int:
    try:
        value = int(text)
    except ValueError:
        raise NerAppError(f"{option} {text!r}: expected an integer") from None
    if low is not None and value < low:
        raise NerAppError(f"{option} {value}: expected an integer >= {low}")
    return value


def run(args: argparse.Namespace) -> int:
    from ner_app.files import STDOUT, claim_file, claim_folder
    from ner_app.jobs.setup import check_device
    from ner_app.predict.loading import check_model_device
    from ner_app.report.formats import output_format
    from ner_app.tagger.crf.uncertainty import STRATEGIES

    if args.strategy not in STRATEGIES:
        raise NerAppError(f"--strategy {args.strategy!r}: expected one of {', '.join(STRATEGY_NAMES)}")
    if args.k is None and args.tokens is None:
        raise NerAppError(
            "select: say how much to select: --k N (sentences), --tokens N (a token budget), or both"
        )
    k = None if args.k is None else _integer(args.k, "--k", low=1)
    tokens = None if args.tokens is None else _integer(args.tokens, "--tokens", low=1)
    seed = _integer(args.seed, "--seed")
    fmt = None if args.format == LINES else output_format(args.format)
    out = Path(args.output)
    if args.output != STDOUT and out.exists() and out.resolve() == Path(args.input).resolve():
        raise NerAppError(f"--output {out}: is the pool --input; name another file")
    claim = output_claim(args)
    if fmt is not None and fmt.files is not None:  # a folder: what it replaces is checked file by file
        claim_folder(out, dataclasses.replace(claim, overwrite=True))
    else:
        claim_file(args.output, claim)
    if args.model:
        check_model_device(args.model, args.device)
    else:  # the shipped tagger, a torch export (random selection without --model needs none)
        check_device(args.device)
    from ner_app.jobs.select import SelectJob, run_select

    job = SelectJob(
        input=args.input,
        pool_format=args.pool_format,
        output=args.output,
        format=fmt,
        k=k,
        tokens=tokens,
        seed=seed,
        strategy=args.strategy,
        order=args.order,
        model=args.model,
        device=args.device,
        batch_size=args.batch_size,
        max_tokens=args.max_tokens,
        threads=args.threads,
        claim=claim,
    )
    run_select(job)
    return 0
