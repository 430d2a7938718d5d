"""``train``: the tagger trained and evaluated on a config (``train/run.py``), once or over several seeds
(``jobs/seeds.py``), then its HTML report. ``python train.py`` runs the same."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ner_app.cli.arguments import positive_int
from ner_app.cli.common import until_sigterm

DESCRIPTION = (
    "Trains on train.txt, keeps the epoch with the best dev entity F1, evaluates it on dev and test, and writes "
    "reports, metrics, checkpoints, an export and report.html into output_dir. key.sub=value arguments override "
    "the config (docs/configuration.md)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``train`` (also those of its own parser, ``parse_alone``)."""
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


def add_parser(commands: argparse._SubParsersAction) -> None:
    train = commands.add_parser(
        "train",
        help="train and evaluate the tagger (the same as python train.py)",
        description=DESCRIPTION,
    )
    add_arguments(train)


def parse_alone(argv: list[str]) -> argparse.Namespace:
    """``train``'s arguments: overrides may come before or after --resume, which argparse only allows outside
    subparsers."""
    parser = argparse.ArgumentParser(prog="ner-app train", description=DESCRIPTION)
    add_arguments(parser)
    args = parser.parse_intermixed_args(argv)
    args.command = "train"
    return args


def run(args: argparse.Namespace) -> int:

    from ner_app.config.load import load_config
    from ner_app.jobs.seeds import SeedsError, parse_seeds, train_seeds
    from ner_app.train.early_checks import check_before_training

    # the seeds before the config: the cheaper error first
    seeds = parse_seeds(args.seeds) if args.seeds is not None else None
    if seeds is None and args.parallel is not None:
        raise SeedsError("--parallel N goes with --seeds (it trains N seeds at a time)")
    if args.init_from is not None:  # an override like any other: typed, so relative to the working directory
        args.overrides = [*args.overrides, f"model.init_from={json.dumps(args.init_from)}"]
    cfg = load_config(args.config, args.overrides)
    check_before_training(
        cfg
    )  # values, data and biLM files: one line in a second, before torch and Lightning
    from ner_app.progress import console_logging

    console_logging()
    if seeds is None:
        return train_once(cfg, args.resume)
    return train_seeds(cfg, seeds, args.config, args.overrides, args.parallel, train_once)


def train_once(cfg: Any, resume: bool) -> int:
    """One training run of ``cfg``, then its HTML report; the last line names the report."""
    from ner_app.errors import SIGTERM_EXIT
    from ner_app.train.run import run_training  # heavy imports after the config is known to be valid

    metrics = until_sigterm(lambda: run_training(cfg, resume=resume), cfg.output_dir)
    if metrics is None:
        return SIGTERM_EXIT
    if not metrics:  # a DDP rank other than 0: rank 0 reports
        return 0
    from ner_app.report.run_report import report_after_training

    report = report_after_training(Path(cfg.output_dir))  # never raises: the results are already on disk
    dev, test = metrics["dev"]["f1"], metrics["test"]["f1"]
    print(f"\ndev F1 {dev:.2f}  test F1 {test:.2f}  ({cfg.output_dir}/metrics.json)")
    print(f"report: {report}" if report else "report: none written (see the warning above)", flush=True)
    return 0
