"""``evaluate``: an export scored on a gold file in any format (``predict/evaluate.py``), entity precision, recall and
F1 per type."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ner_app.cli.arguments import (
    Owned,
    add_gold_argument,
    add_model_arguments,
    add_overwrite_argument,
    output_claim,
)
from ner_app.errors import NerAppError


def add_parser(commands: argparse._SubParsersAction) -> None:
    evaluate = commands.add_parser(
        "evaluate",
        help="score an exported model on a gold file (CoNLL or any format convert reads): entity precision, recall and F1 per type",
        description="Tags every sentence of a gold file (CoNLL token ... gold-tag lines, IOB1 or IOB2, or any format convert reads: --from) and scores "
        "the predicted entities against the gold ones as conlleval does (seqeval default mode, the scores of "
        "metrics.json); --predictions writes the token gold predicted lines conlleval reads.",
    )
    add_gold_argument(evaluate, "evaluate", "--input")
    evaluate.add_argument("--json", action="store_true", help="print the scores as JSON (for scripts)")
    evaluate.add_argument(
        "--predictions",
        metavar="FILE",
        help="also write token gold predicted lines here (- for standard output; the scores then go to stderr)",
    )
    add_overwrite_argument(evaluate)
    evaluate.add_argument(
        "--case-views",
        action="store_true",
        help="also score the file lower-cased and upper-cased (gold tags unchanged): a view, P, R, F1 table, "
        "and case_views in --json; --predictions holds the view as written",
    )
    add_model_arguments(
        evaluate,
        Owned("ner_app.text.batching", "PREDICT_BATCH_SIZE"),
        "padded tokens a batch holds at most, as predict's (default %(default)s)",
    )


def run(args: argparse.Namespace) -> int:
    import json

    from ner_app.cli.common import check_gold_file
    from ner_app.files import STDOUT, claim_file, output_target
    from ner_app.jobs.setup import model_path
    from ner_app.predict.evaluate import case_view_table, evaluate_file, score_table
    from ner_app.predict.loading import check_model_device, load_predictor
    from ner_app.report.formats import FORMATS, Target, write_output
    from ner_app.text.case import CASE_VIEWS

    model = model_path(args.model)
    check_model_device(model, args.device)  # before the gold file is read
    check_gold_file(args.gold, args.gold_option, args.fmt)
    if args.predictions is not None:
        out = Path(args.predictions)
        if out.is_dir():
            raise NerAppError(f"--predictions {out}: is a folder, expected a file name")
        if args.predictions != STDOUT and out.exists() and out.resolve() == Path(args.gold).resolve():
            raise NerAppError(f"--predictions {out}: is the gold file {args.gold_option}; name another file")
        claim_file(args.predictions, output_claim(args, "--predictions"))
    # with --predictions -, standard output holds the predictions alone and the scores go to stderr
    to_stdout = args.predictions is not None and output_target(args.predictions)[0] == "stdout"
    scores = sys.stderr if to_stdout else sys.stdout
    predictor = load_predictor(model, args.device, args.batch_size, args.max_tokens, args.threads)
    views = CASE_VIEWS if args.case_views else CASE_VIEWS[:1]
    result, items = evaluate_file(predictor, args.gold, views, args.fmt)
    result["model"] = str(model)
    if args.predictions is not None:
        write_output(args.predictions, FORMATS["conll"], items, Target(), output_claim(args, "--predictions"))
    if args.json:
        print(json.dumps(result, indent=2), file=scores)
    else:
        print(
            f"{result['file']}: {result['sentences']:,} sentences, {result['tokens']:,} tokens, "
            f"{result['scheme']} tags; entity scores in %, conlleval's counting (seqeval default mode)\n",
            file=scores,
        )
        print(score_table(result), end="", file=scores)
        if args.case_views:
            print("\nThe same file lower-cased and upper-cased (gold tags unchanged):\n", file=scores)
            print(case_view_table(result), end="", file=scores)
    if args.predictions:
        where = "standard output" if to_stdout else args.predictions
        print(f"wrote {where} (token gold predicted)", file=sys.stderr)
    return 0
