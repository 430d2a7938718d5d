"""``find-threshold``: the minimum entity score to keep, chosen on gold data (``decisions/threshold.py``)."""

from __future__ import annotations

import argparse

from ner_app.cli.arguments import Owned, add_gold_argument, add_model_arguments
from ner_app.errors import NerAppError


def add_parser(commands: argparse._SubParsersAction) -> None:
    find = commands.add_parser(
        "find-threshold",
        help="sweep the minimum entity score on a gold file (CoNLL or any format convert reads): precision, recall and F1 per threshold",
        description="Tags a gold file (CoNLL or any format convert reads) once, then drops the entities scoring below each threshold and "
        "scores the rest as evaluate does (seqeval default mode). Prints a table over a grid of thresholds and "
        "suggests one: the best F1, or with --precision the lowest threshold whose precision reaches it "
        "(docs/active_learning.md).",
    )
    add_gold_argument(find, "find-threshold", "--input")
    find.add_argument(
        "--precision",
        metavar="P",
        help="suggest the lowest threshold whose entity precision is at least P, a fraction in (0, 1] "
        "(default: suggest the best F1)",
    )
    find.add_argument(
        "--json",
        action="store_true",
        help="print the grid, every distinct score's row and the suggestion as JSON",
    )
    add_model_arguments(
        find,
        Owned("ner_app.text.batching", "PREDICT_BATCH_SIZE"),
        "padded tokens a batch holds at most, as predict's (default %(default)s)",
    )


def _fraction(text: str) -> float:
    """--precision: a fraction in (0, 1]; 95 is refused with the hint that it means 0.95."""
    try:
        value = float(text)
    except ValueError:
        raise NerAppError(f"--precision {text!r}: expected a fraction in (0, 1], such as 0.95") from None
    if not 0 < value <= 1:
        hint = f" ({value:g}% is {value / 100:g})" if 1 < value <= 100 else ""
        raise NerAppError(f"--precision {text}: expected a fraction in (0, 1], such as 0.95{hint}")
    return value


def run(args: argparse.Namespace) -> int:
    import json

    from ner_app.cli.common import check_gold_file
    from ner_app.jobs.setup import model_path
    from ner_app.predict.loading import check_model_device, load_predictor

    precision = None if args.precision is None else _fraction(args.precision)
    model = model_path(args.model)
    check_model_device(model, args.device)
    check_gold_file(args.gold, args.gold_option, args.fmt)
    from ner_app.decisions.threshold import find_threshold as sweep
    from ner_app.decisions.threshold import suggestion_line, threshold_table

    predictor = load_predictor(model, args.device, args.batch_size, args.max_tokens, args.threads)
    result = {"model": str(model), **sweep(predictor, args.gold, precision, args.fmt)}
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(
        f"{result['file']}: {result['sentences']:,} sentences, {result['gold_entities']:,} gold entities, "
        f"{result['predicted_entities']:,} predicted; entities scoring below the minimum are dropped; scores "
        "in %, conlleval's counting (seqeval default mode)\n"
    )
    print(threshold_table(result))
    print(suggestion_line(result))
    return 0
