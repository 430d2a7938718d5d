"""The command handlers: each turns parsed arguments into one call of the stage that does the work."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ner_app.cli.active_learning import find_threshold, select
from ner_app.cli.benchmark import benchmark
from ner_app.cli.calibrate import calibrate
from ner_app.cli.check_data import check_data
from ner_app.cli.convert import convert
from ner_app.cli.inference import embed, evaluate, export, predict
from ner_app.cli.parser import TRAIN_DESCRIPTION, OwnedNamespace, add_train_arguments, build_parser
from ner_app.cli.serving import serve
from ner_app.errors import SIGTERM_EXIT, NerAppError, Stopped, run_reporting_errors, stop_reported


def _until_sigterm(run: Callable[[], dict[str, Any]], output_dir: str) -> dict[str, Any] | None:
    """``run()``, or None after printing one line if SIGTERM stopped it.

    ``Stopped`` comes from the handler of ``run_reporting_errors``. Without that handler (outside the main
    thread, where none can be set) Lightning answers SIGTERM by ending its loop with ``SIGTERMException``, a
    ``SystemExit`` whose exit code is 0: a stopped run would look finished to the shell and to job queues.
    """
    from pytorch_lightning.utilities.exceptions import SIGTERMException

    try:
        return run()
    except (Stopped, SIGTERMException):
        stop_reported()
        last = Path(output_dir) / "checkpoints" / "last.ckpt"
        then = (
            f"the same command with --resume continues from {last}"
            if last.is_file()
            else "no checkpoint was written yet: the same command without --resume starts it again"
        )
        print(f"stopped by SIGTERM before the run finished; {then}", file=sys.stderr)
        return None


def _train(args: argparse.Namespace) -> int:
    import logging

    from ner_app.cli.seeds import SeedsError, parse_seeds, train_seeds
    from ner_app.config.load import load_config
    from ner_app.train.early_checks import check_before_training

    # the seeds before the config: the cheaper error first
    seeds = parse_seeds(args.seeds) if args.seeds is not None else None
    if seeds is None and args.parallel is not None:
        raise SeedsError("--parallel N goes with --seeds (it trains N seeds at a time)")
    if args.init_from is not None:  # a path typed in a shell: relative to the working directory
        args.overrides = [*args.overrides, f"model.init_from={json.dumps(os.path.abspath(args.init_from))}"]
    cfg = load_config(args.config, args.overrides)
    check_before_training(
        cfg
    )  # values, data and biLM files: one line in a second, before torch and Lightning
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if seeds is None:
        return _train_once(cfg, args.resume)
    return train_seeds(cfg, seeds, args.config, args.overrides, args.parallel, _train_once)


def _train_once(cfg: Any, resume: bool) -> int:
    """One training run of ``cfg``, then its HTML report; the last line names the report."""
    from ner_app.train.run import run_training  # heavy imports after the config is known to be valid

    metrics = _until_sigterm(lambda: run_training(cfg, resume=resume), cfg.output_dir)
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


def _is_stdout(path: str) -> bool:
    """Whether an output path is this process's standard output (``-``, /dev/stdout, a link to it)."""
    from ner_app.files import output_target

    return output_target(path)[0] == "stdout"


def _compare(args: argparse.Namespace) -> int:
    from ner_app.report.compare import group_runs, read_runs
    from ner_app.report.compare_tables import compare_tables, markdown, narrow

    groups = group_runs(read_runs(args.runs))
    tables = narrow(compare_tables(groups))  # wide tables cut into parts that fit a terminal and the page
    # with --html -, standard output holds the page alone and the tables (or JSON) go to stderr
    shown = sys.stderr if args.html and _is_stdout(args.html) else sys.stdout
    if args.json:
        import json

        from ner_app.report.compare_json import compare_json

        print(json.dumps(compare_json(groups), indent=2, ensure_ascii=False, allow_nan=False), file=shown)
    else:
        print(markdown(tables), end="", file=shown)
    if args.html:
        from ner_app.files import write_text
        from ner_app.report.compare_html import compare_html
        from ner_app.report.page import refuse_foreign_page

        out = Path(args.html)
        refuse_foreign_page(out)  # never over a run's own files
        write_text(out, compare_html(groups, tables))  # a reader never sees half a page
        print(f"wrote {out}", file=sys.stderr)
    return 0


def _pretrain_bilm(args: argparse.Namespace) -> int:
    import logging

    from ner_app.config.checks import check_pretrain_config
    from ner_app.config.load import BilmPretrainConfig, load_config

    overrides = [*args.overrides, *([f"train.threads={args.threads}"] if args.threads else [])]
    cfg = load_config(args.config, overrides, schema=BilmPretrainConfig)
    check_pretrain_config(cfg)  # before torch and Lightning: a bad value is one line in a second
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    from ner_app.pretrain.run import run_pretraining  # heavy imports after the config is known to be valid

    metrics = _until_sigterm(lambda: run_pretraining(cfg, resume=args.resume), cfg.output_dir)
    if metrics is None:
        return SIGTERM_EXIT
    if not metrics:  # a DDP rank other than 0: rank 0 reports
        return 0
    for name, result in metrics["heldout"].items():
        print(
            f"{name} ({result['context']} context): perplexity forward {result['forward']:.2f} "
            f"backward {result['backward']:.2f} mean {result['mean']:.2f}"
        )
    print(f"{metrics['steps']} steps; biLM written to {cfg.output_dir} (metrics.json)")
    return 0


def _bilm_perplexity(args: argparse.Namespace) -> int:
    import json

    from ner_app.pretrain.perplexity import heldout_perplexities

    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    results = heldout_perplexities(args.run_dir, args.heldout, args.context, args.max_sentences)
    shown = (
        sys.stderr if args.json and _is_stdout(args.json) else sys.stdout
    )  # --json -: stdout holds the JSON
    print(
        "| held-out file | context | sentences | predicted per direction | forward | backward | mean |",
        file=shown,
    )
    print("|---|---|---:|---:|---:|---:|---:|", file=shown)
    for name, result in results.items():
        for context, r in result["contexts"].items():
            print(
                f"| {name} | {context} | {result['sentences']:,} | {r['predicted_tokens']:,} | "
                f"{r['forward']:.1f} | {r['backward']:.1f} | {r['mean']:.1f} |",
                file=shown,
            )
    if args.json:
        from ner_app.files import atomic_path

        with atomic_path(args.json) as tmp:
            tmp.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


def _report(args: argparse.Namespace) -> int:
    from ner_app.report import write_report

    if not Path(args.run_dir).is_dir():  # also a symlink loop, which resolve() would raise on
        raise NerAppError(f"{args.run_dir}: not a folder (expected a run folder written by train.py)")
    out = write_report(args.run_dir, args.output)
    print(f"wrote {'the report to standard output' if str(out) == '-' else out}", file=sys.stderr)
    return 0


def _download_elmo(args: argparse.Namespace) -> int:
    from ner_app.bilm.download import download_elmo

    options, weights = download_elmo(args.model, args.output, args.base_url)
    print(f"elmo.options={options}\nelmo.weights={weights}")  # the overrides (or config lines) that use them
    return 0


# command name -> handler (the parser lives in parser.py)
HANDLERS = {
    "train": _train,
    "embed": embed,
    "export": export,
    "predict": predict,
    "evaluate": evaluate,
    "calibrate": calibrate,
    "compare": _compare,
    "pretrain-bilm": _pretrain_bilm,
    "bilm-perplexity": _bilm_perplexity,
    "report": _report,
    "download-elmo": _download_elmo,
    "serve": serve,
    "convert": convert,
    "check-data": check_data,
    "find-threshold": find_threshold,
    "select": select,
    "benchmark": benchmark,
}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["train"]:
        # Overrides may come before or after --resume, which argparse only allows outside subparsers.
        parser = argparse.ArgumentParser(prog="ner-app train", description=TRAIN_DESCRIPTION)
        add_train_arguments(parser)
        args = parser.parse_intermixed_args(argv[1:])
        args.command = "train"
    else:
        args = build_parser().parse_args(argv, namespace=OwnedNamespace())
    # One policy for every command: a user's mistake is one line and exit 2, a bug keeps its traceback.
    return run_reporting_errors(lambda: HANDLERS[args.command](args))


if __name__ == "__main__":
    sys.exit(main())
