"""``calibrate``: an export's score temperature fitted on a gold file (any format convert reads), written as a calibrated copy
(``decisions/calibrate.py``)."""

from __future__ import annotations

import argparse
import sys

from ner_app.cli.arguments import (
    Owned,
    add_gold_argument,
    add_overwrite_argument,
    output_claim,
    positive_int,
)


def add_parser(commands: argparse._SubParsersAction) -> None:
    calibrate = commands.add_parser(
        "calibrate",
        help="fit an export's score temperature on a gold file (CoNLL or any format convert reads) and write a calibrated copy",
        description="Tags every sentence of a gold file (dev data, not test data; CoNLL or any format convert reads, --from) with the export, fits one "
        "temperature so that entity scores match how often entities are right (log loss over the predicted "
        "entities), and writes a copy of the export holding it to --output. Predicted entities and F1 do not "
        "change; prints the expected calibration error and the log loss before and after (docs/calibration.md).",
    )
    calibrate.add_argument(
        "--model",
        required=True,
        help="an export directory or an ONNX folder (read only; an ONNX folder gives a calibrated ONNX folder)",
    )
    add_gold_argument(calibrate, "calibrate", "--dev")
    calibrate.add_argument(
        "--output",
        required=True,
        help="the calibrated export's folder (new, or an earlier output of calibrate)",
    )
    add_overwrite_argument(calibrate)
    calibrate.add_argument(
        "--batch-size",
        type=positive_int,
        default=Owned("ner_app.text.batching", "PREDICT_BATCH_SIZE"),
        help="sentences per forward pass (default %(default)s)",
    )
    calibrate.add_argument(
        "--threads", type=positive_int, help="torch CPU threads (an ONNX folder's: onnxruntime's per graph)"
    )
    calibrate.add_argument("--device", default="cpu", choices=["cpu", "cuda"])


def run(args: argparse.Namespace) -> int:
    from ner_app.decisions.calibrate import calibrate_export
    from ner_app.predict.loading import check_model_device

    check_model_device(args.model, args.device)
    fit, data = calibrate_export(
        args.model,
        args.gold,
        args.output,
        args.device,
        args.batch_size,
        option=args.gold_option,
        fmt=args.fmt,
        claim=output_claim(args),
        threads=args.threads,
    )
    print(
        f"{args.gold}: {fit.entities:,} predicted entities in {data.sentences:,} sentences; temperature "
        f"{fit.temperature:.4f} (fitted in {fit.seconds:.1f} s)\n"
        f"entity ECE (10 bins)  {fit.ece_before:.4f} -> {fit.ece_after:.4f}\n"
        f"entity log loss       {fit.log_loss_before:.4f} -> {fit.log_loss_after:.4f}"
    )
    print(f"wrote the calibrated export to {args.output}", file=sys.stderr)
    return 0
