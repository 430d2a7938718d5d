"""The command line's argparse tree: every command, its arguments and help (``python -m ner_app --help``).
Argument types and ``Owned`` defaults: ``cli/arguments.py``; the commands that use a model:
``cli/model_commands.py``.
"""

from __future__ import annotations

import argparse

from ner_app.cli.active_learning import add_find_threshold_parser, add_select_parser
from ner_app.cli.arguments import Owned, OwnedNamespace, positive_int
from ner_app.cli.calibrate import add_calibrate_parser
from ner_app.cli.check_data import add_check_data_parser
from ner_app.cli.convert import add_convert_parser
from ner_app.cli.model_commands import (
    add_download_elmo_parser,
    add_embed_parser,
    add_evaluate_parser,
    add_export_parser,
    add_predict_parser,
    add_serve_parser,
)

__all__ = ["Owned", "OwnedNamespace", "build_parser", "add_train_arguments", "TRAIN_DESCRIPTION"]


def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``train`` (shared with ``train.py``)."""
    parser.add_argument("--config", required=True, help="a YAML file in configs/")
    parser.add_argument(
        "--resume", action="store_true", help="continue the run in output_dir from its last checkpoint"
    )
    parser.add_argument(
        "--init-from",
        metavar="EXPORT",
        help="start from this export's weights (the same as model.init_from=EXPORT): its words and entity types "
        "are kept, the data's new ones added; data.previous_dev=FILE scores the old types before and after",
    )
    parser.add_argument(
        "--seeds",
        metavar="SPEC",
        help="one run per seed (1-5, 1,3,5 or 1-3,7), each in output_dir/seedN, then their compare table; "
        "run again, it skips finished seeds and continues interrupted ones",
    )
    parser.add_argument(
        "--parallel",
        type=positive_int,
        metavar="N",
        help="with --seeds: train N seeds at a time, as child processes of one thread each",
    )
    parser.add_argument("overrides", nargs="*", metavar="key.sub=value", help="config overrides")


TRAIN_DESCRIPTION = (
    "Trains on train.txt, keeps the epoch with the best dev entity F1, evaluates it on dev and test, and writes "
    "reports, metrics, checkpoints, an export and report.html into output_dir. key.sub=value arguments override "
    "the config (docs/configuration.md)."
)


def add_train_parser(commands: argparse._SubParsersAction) -> None:
    train = commands.add_parser(
        "train",
        help="train and evaluate the tagger (the same as python train.py)",
        description=TRAIN_DESCRIPTION,
    )
    add_train_arguments(train)


def add_compare_parser(commands: argparse._SubParsersAction) -> None:
    compare = commands.add_parser(
        "compare",
        help="compare finished runs: dev/test F1 mean +/- std per config, per entity type, paired by seed",
        description="Groups the run folders by config (seed, output_dir, threads, logging and cache keys left "
        "out) and data, and prints Markdown tables: F1 mean +/- sample std over seeds, per entity type, and "
        "per-seed differences between configs that share seeds; tables wider than 100 characters are cut into "
        "parts (docs/reports.md).",
    )
    compare.add_argument("runs", nargs="+", metavar="RUN_DIR", help="train.py output folders")
    compare.add_argument(
        "--html",
        metavar="FILE",
        help="also write the tables and a chart to one HTML file (- for standard output)",
    )
    compare.add_argument(
        "--json",
        action="store_true",
        help="print the comparison as one JSON document instead of the tables (keys: docs/reports.md)",
    )


def add_pretrain_bilm_parser(commands: argparse._SubParsersAction) -> None:
    pretrain = commands.add_parser(
        "pretrain-bilm",
        help="pretrain a biLM on raw text and export it in the public ELMo format",
        description="Trains forward and backward LMs with a shared sampled softmax (the bilm-tf recipe), then "
        "writes options.json, weights.hdf5, softmax.hdf5, vocab.txt and metrics.json into output_dir.",
    )
    pretrain.add_argument("--config", required=True, help="a YAML file such as configs/bilm_news.yaml")
    pretrain.add_argument(
        "--resume", action="store_true", help="continue the run in output_dir from its last checkpoint"
    )
    pretrain.add_argument("--threads", type=positive_int, help="torch CPU threads (same as train.threads=N)")
    pretrain.add_argument("overrides", nargs="*", metavar="key.sub=value", help="config overrides")


def add_bilm_perplexity_parser(commands: argparse._SubParsersAction) -> None:
    ppl = commands.add_parser(
        "bilm-perplexity",
        help="exact held-out perplexity of a pretrain-bilm output folder, per direction and context",
        description="Scores held-out files (one sentence a line, blank lines between documents, or CoNLL files) "
        "with the exported LMs (options.json, weights.hdf5, softmax.hdf5, vocab.txt) and the full softmax, each "
        "sentence alone and/or each document as one stream (docs/pretraining.md).",
    )
    ppl.add_argument("run_dir", metavar="RUN_DIR", help="a pretrain-bilm output_dir")
    ppl.add_argument("--heldout", nargs="+", required=True, metavar="FILE", help="held-out text files")
    ppl.add_argument(
        "--context", nargs="+", choices=["sentence", "document"], default=["sentence", "document"]
    )
    ppl.add_argument("--max-sentences", type=positive_int, help="only the first N sentences of each file")
    ppl.add_argument("--threads", type=positive_int, help="torch CPU threads")
    ppl.add_argument("--json", metavar="FILE", help="also write the results as JSON (- for standard output)")


def add_report_parser(commands: argparse._SubParsersAction) -> None:
    report = commands.add_parser(
        "report",
        help="write a run folder's self-contained HTML report (curves, per-type scores, errors, ELMo weights)",
        description="Reads metrics.json, logs/metrics.csv, predictions_{dev,test}.conll and the trained weights "
        "of a train.py run folder and writes one HTML file with its images embedded (docs/reports.md).",
    )
    report.add_argument("run_dir", metavar="RUN_DIR", help="a train.py output_dir")
    report.add_argument("--output", help="the HTML file (default RUN_DIR/report.html; - for standard output)")


def build_parser() -> argparse.ArgumentParser:
    """Every command of ``ner-app``, one ``add_*_parser`` each."""
    parser = argparse.ArgumentParser(
        prog="ner-app", description="ELMo BiLSTM-CRF named-entity tagging (also: python -m ner_app)."
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add in (
        add_train_parser,
        add_embed_parser,
        add_export_parser,
        add_predict_parser,
        add_evaluate_parser,
        add_calibrate_parser,
        add_compare_parser,
        add_pretrain_bilm_parser,
        add_bilm_perplexity_parser,
        add_report_parser,
        add_download_elmo_parser,
        add_serve_parser,
        add_convert_parser,
        add_check_data_parser,
        add_find_threshold_parser,
        add_select_parser,
    ):
        add(commands)
    return parser
