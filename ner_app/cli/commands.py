"""The command handlers: each turns parsed arguments into one call of the stage that does the work."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ner_app.cli.parser import add_train_arguments, build_parser
from ner_app.cli.serving import serve
from ner_app.errors import SIGTERM_EXIT, NerAppError, Stopped, run_reporting_errors


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
        last = Path(output_dir) / "checkpoints" / "last.ckpt"
        then = (f"the same command with --resume continues from {last}" if last.is_file()
                else "no checkpoint was written yet: the same command without --resume starts it again")  # fmt: skip
        print(f"stopped by SIGTERM before the run finished; {then}", file=sys.stderr)
        return None


def _train(args: argparse.Namespace) -> int:
    import logging

    from ner_app.cli.seeds import SeedsError, parse_seeds, train_seeds
    from ner_app.config.load import load_config

    # the seeds before the config: the cheaper error first
    seeds = parse_seeds(args.seeds) if args.seeds is not None else None
    if seeds is None and args.parallel is not None:
        raise SeedsError("--parallel N goes with --seeds (it trains N seeds at a time)")
    cfg = load_config(args.config, args.overrides)
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


def check_device(device: str) -> None:
    """``--device cuda`` on a machine without CUDA is the user's choice to correct, in one line."""
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        raise NerAppError(
            f"--device cuda: torch {torch.__version__} sees no CUDA device here; use --device cpu"
        )


def _embed(args: argparse.Namespace) -> int:
    import torch

    from ner_app.bilm.weights import load_bilm

    if args.threads:
        torch.set_num_threads(args.threads)
    check_device(args.device)
    from ner_app.serve.embed import embed_file, inference_autocast

    bilm = load_bilm(args.options, args.weights, stateful=args.stateful)
    if args.max_stream_positions < 2:
        raise NerAppError(
            f"--max-stream-positions: expected at least 2 (<S> and </S>), found {args.max_stream_positions}"
        )
    if args.outputs is not None:  # TF-Hub ELMo's named outputs (docs/serving.md)
        from ner_app.serve.embed_outputs import embed_outputs_file, parse_mix, parse_outputs

        names = parse_outputs(args.outputs, bilm.num_layers - 1)
        mix = parse_mix(args.scalar_mix, args.gamma, bilm.num_layers)
        with inference_autocast(args.device, args.precision):
            count = embed_outputs_file(bilm, args.input, args.output, names, mix, batch_size=args.batch_size,
                                       device=args.device, context=args.context,
                                       max_stream_positions=args.max_stream_positions)  # fmt: skip
    elif args.scalar_mix is not None or args.gamma is not None:
        raise NerAppError("--scalar-mix and --gamma go with --outputs (the default layout has no mix)")
    else:
        count = embed_file(bilm, args.input, args.output, batch_size=args.batch_size, device=args.device,
                           context=args.context, max_stream_positions=args.max_stream_positions,
                           precision=args.precision)  # fmt: skip
    print(f"wrote {count} sentences to {args.output}", file=sys.stderr)
    return 0


def _export(args: argparse.Namespace) -> int:
    from ner_app.train.export import export_checkpoint

    out = export_checkpoint(args.checkpoint, args.output)
    print(f"exported {args.checkpoint} to {out}", file=sys.stderr)
    return 0


def _predict(args: argparse.Namespace) -> int:
    import json

    import torch

    from ner_app.serve.predictor import Predictor, predict_conll
    from ner_app.text.lines import decoded_lines

    if args.threads:
        torch.set_num_threads(args.threads)
    check_device(args.device)
    predictor = Predictor.from_export(args.model, device=args.device, batch_size=args.batch_size)
    name = "<stdin>" if args.input == "-" else args.input
    if args.input != "-" and Path(args.input).is_dir():
        raise NerAppError(f"--input {args.input}: is a folder, expected a text file or -")
    source = sys.stdin.buffer if args.input == "-" else open(args.input, "rb")  # noqa: SIM115
    with source:
        lines = decoded_lines(source, name)  # split on \n only: one output per input line
        if args.format == "conll":
            for line in predict_conll(predictor, lines):
                print(line)
        elif args.format == "html":
            from ner_app.report.predictions_html import entity_types, predictions_html

            types = entity_types(predictor.tags.itos)
            for piece in predictions_html(predictor.predict_texts(lines), types, title=f"Entities in {name}"):
                sys.stdout.write(piece)
        else:
            for result in predictor.predict_texts(lines):
                # JSON leaves these raw, and line readers split on them: escape them to keep one line per object
                line = json.dumps(result, ensure_ascii=False)
                print(
                    line.replace("\x85", "\\u0085").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
                )
    return 0


def _compare(args: argparse.Namespace) -> int:
    from ner_app.report.compare import group_runs, read_runs
    from ner_app.report.compare_tables import compare_tables, markdown, narrow

    groups = group_runs(read_runs(args.runs))
    tables = narrow(compare_tables(groups))  # wide tables cut into parts that fit a terminal and the page
    if args.json:
        import json

        from ner_app.report.compare_json import compare_json

        print(json.dumps(compare_json(groups), indent=2, ensure_ascii=False, allow_nan=False))
    else:
        print(markdown(tables), end="")
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

    from ner_app.config.load import BilmPretrainConfig, load_config

    overrides = [*args.overrides, *([f"train.threads={args.threads}"] if args.threads else [])]
    cfg = load_config(args.config, overrides, schema=BilmPretrainConfig)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    from ner_app.pretrain.run import run_pretraining  # heavy imports after the config is known to be valid

    metrics = _until_sigterm(lambda: run_pretraining(cfg, resume=args.resume), cfg.output_dir)
    if metrics is None:
        return SIGTERM_EXIT
    if not metrics:  # a DDP rank other than 0: rank 0 reports
        return 0
    for name, result in metrics["heldout"].items():
        print(f"{name} ({result['context']} context): perplexity forward {result['forward']:.2f} "
              f"backward {result['backward']:.2f} mean {result['mean']:.2f}")  # fmt: skip
    print(f"{metrics['steps']} steps; biLM written to {cfg.output_dir} (metrics.json)")
    return 0


def _bilm_perplexity(args: argparse.Namespace) -> int:
    import json

    from ner_app.pretrain.perplexity import heldout_perplexities

    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    results = heldout_perplexities(args.run_dir, args.heldout, args.context, args.max_sentences)
    print("| held-out file | context | sentences | predicted per direction | forward | backward | mean |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for name, result in results.items():
        for context, r in result["contexts"].items():
            print(f"| {name} | {context} | {result['sentences']:,} | {r['predicted_tokens']:,} | "
                  f"{r['forward']:.1f} | {r['backward']:.1f} | {r['mean']:.1f} |")  # fmt: skip
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
    print(f"wrote {out}", file=sys.stderr)
    return 0


def _download_elmo(args: argparse.Namespace) -> int:
    from ner_app.serve.download import download_elmo

    options, weights = download_elmo(args.model, args.output, args.base_url)
    print(f"elmo.options={options}\nelmo.weights={weights}")  # the overrides (or config lines) that use them
    return 0


# command name -> handler (the parser lives in parser.py)
HANDLERS = {
    "train": _train,
    "embed": _embed,
    "export": _export,
    "predict": _predict,
    "compare": _compare,
    "pretrain-bilm": _pretrain_bilm,
    "bilm-perplexity": _bilm_perplexity,
    "report": _report,
    "download-elmo": _download_elmo,
    "serve": serve,
}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["train"]:
        # Overrides may come before or after --resume, which argparse only allows outside subparsers.
        parser = argparse.ArgumentParser(prog="python -m ner_app train", description=__doc__)
        add_train_arguments(parser)
        args = parser.parse_intermixed_args(argv[1:])
        args.command = "train"
    else:
        args = build_parser().parse_args(argv)
    # One policy for every command: a user's mistake is one line and exit 2, a bug keeps its traceback.
    return run_reporting_errors(lambda: HANDLERS[args.command](args))


if __name__ == "__main__":
    sys.exit(main())
