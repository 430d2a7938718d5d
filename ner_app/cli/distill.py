"""``distill``: teachers' exact CRF marginals on unlabelled text, averaged into a marginals folder
(``predict/teachers.py``), then a student trained on them and on the gold data like ``train`` trains
(``train/distillation.py``; docs/distillation.md)."""

from __future__ import annotations

import argparse
import json

from ner_app.cli.arguments import positive_int

DESCRIPTION = (
    "Labels --unlabelled text with the exact tag marginals of every --teacher export (forward-backward, "
    "averaged over the teachers: an ensemble), in chunks written to --marginals as they are done (run again, it "
    "resumes; the same teachers and text reuse the folder), then trains the student of --config on the gold "
    "data and those marginals (distill.weight) into output_dir, as train does: reports, a calibrated export, "
    "report.html. key.sub=value arguments override the config (docs/distillation.md)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``distill`` (also those of its own parser, ``parse_alone``)."""
    parser.add_argument("--config", required=True, help="the student's config (a YAML file in configs/)")
    parser.add_argument(
        "--teacher",
        action="append",
        required=True,
        metavar="EXPORT",
        help="a teacher export (repeat for an ensemble: their marginals are averaged)",
    )
    parser.add_argument(
        "--unlabelled",
        required=True,
        metavar="FILE",
        help="unlabelled text as predict reads it: raw text (one or more sentences a line) or CoNLL token lines",
    )
    parser.add_argument(
        "--marginals",
        required=True,
        metavar="DIR",
        help="the teachers' marginals folder: new, or one this command wrote for the same teachers and text",
    )
    parser.add_argument(
        "--max-sentences",
        type=positive_int,
        metavar="N",
        help="label only the first N sentences of --unlabelled (default: all)",
    )
    parser.add_argument(
        "--chunk-sentences",
        type=positive_int,
        default=2000,
        metavar="N",
        help="sentences a chunk of the marginals folder holds: the work a stopped run can lose (default %(default)s)",
    )
    parser.add_argument(
        "--batch-size",
        type=positive_int,
        metavar="N",
        help="the teachers' sentences per forward pass (default: predict's)",
    )
    parser.add_argument("--threads", type=positive_int, metavar="N", help="torch CPU threads of the teachers")
    parser.add_argument(
        "--label-only",
        action="store_true",
        help="write (or finish) the marginals folder and stop: students train on it later (distill again, or "
        "train with distill.marginals=DIR)",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue the student's run in output_dir from its last checkpoint",
    )
    parser.add_argument(
        "--seeds",
        metavar="SPEC",
        help="one student per seed (1-5, 1,3,5), each in output_dir/seedN, all from the same marginals",
    )
    parser.add_argument(
        "--parallel", type=positive_int, metavar="N", help="with --seeds: train N students at a time"
    )
    parser.add_argument("overrides", nargs="*", metavar="key.sub=value", help="config overrides")


def add_parser(commands: argparse._SubParsersAction) -> None:
    distill = commands.add_parser(
        "distill",
        help="distil teacher exports (one, or an ensemble) into a fast student on unlabelled text",
        description=DESCRIPTION,
    )
    add_arguments(distill)


def parse_alone(argv: list[str]) -> argparse.Namespace:
    """``distill``'s arguments, overrides anywhere among the options (as ``train`` reads them)."""
    parser = argparse.ArgumentParser(prog="ner-app distill", description=DESCRIPTION)
    add_arguments(parser)
    args = parser.parse_intermixed_args(argv)
    args.command = "distill"
    return args


def run(args: argparse.Namespace) -> int:
    from ner_app.cli.train import train_once
    from ner_app.config.load import load_config
    from ner_app.errors import NerAppError
    from ner_app.jobs.seeds import parse_seeds, train_seeds
    from ner_app.train.early_checks import check_before_training

    seeds = parse_seeds(args.seeds) if args.seeds is not None else None
    if seeds is None and args.parallel is not None:
        raise NerAppError("--parallel N goes with --seeds (it trains N students at a time)")
    overrides = [*args.overrides, f"distill.marginals={json.dumps(args.marginals)}"]
    cfg = load_config(args.config, overrides)
    check_before_training(cfg)  # the student's config and data before the teachers' long pass
    from ner_app.jobs.setup import set_threads
    from ner_app.predict.teachers import label_text
    from ner_app.progress import console_logging
    from ner_app.text.batching import PREDICT_BATCH_SIZE, PREDICT_MAX_TOKENS

    console_logging()
    set_threads(args.threads)
    manifest = label_text(
        args.teacher,
        args.unlabelled,
        args.marginals,
        chunk_sentences=args.chunk_sentences,
        batch_size=args.batch_size or PREDICT_BATCH_SIZE,
        max_tokens=PREDICT_MAX_TOKENS,
        max_sentences=args.max_sentences,
    )
    print(
        f"teachers' marginals: {manifest.sentences:,} sentences, {manifest.tokens:,} tokens in {args.marginals} "
        f"({len(manifest.teachers)} teacher{'s' if len(manifest.teachers) > 1 else ''})",
        flush=True,
    )
    if args.label_only:
        return 0
    if seeds is None:
        return train_once(cfg, args.resume)
    return train_seeds(cfg, seeds, args.config, overrides, args.parallel, train_once)
