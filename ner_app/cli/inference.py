"""The handlers of the commands that use a trained model or biLM: ``predict``, ``evaluate``, ``embed`` and
``export``. ``predict``, ``evaluate`` and ``embed`` default to what ships in ``data/`` (``predict/api.py``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ner_app.errors import NerAppError

if TYPE_CHECKING:
    from ner_app.report.format_types import OutputFormat


def check_device(device: str) -> None:
    """``--device cuda`` on a machine without CUDA is the user's choice to correct, in one line."""
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        raise NerAppError(
            f"--device cuda: torch {torch.__version__} sees no CUDA device here; use --device cpu"
        )


def check_gold_file(path: str) -> None:
    """``--input`` of the commands that score against gold tags: a regular file (a gold file is read whole: a
    FIFO may never end, /dev/zero never does)."""
    if Path(path).is_dir() or not Path(path).exists():
        raise NerAppError(f"--input {path}: not a file (expected a CoNLL file with gold tags)")
    if not Path(path).is_file():
        raise NerAppError(
            f"--input {path}: not a regular file (a FIFO or a device); expected a CoNLL file with gold tags"
        )


def _set_threads(args: argparse.Namespace) -> None:
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)


def _model(args: argparse.Namespace) -> Path:
    """--model, or the shipped CoNLL-2003 tagger."""
    from ner_app.predict.shipped import SHIPPED_MODEL, shipped

    return Path(args.model) if args.model else shipped(SHIPPED_MODEL, "CoNLL-2003 tagger (--model)")


def embed(args: argparse.Namespace) -> int:
    from ner_app.bilm.weights import load_bilm
    from ner_app.files import check_output

    check_output(args.output, "--output")  # a folder, a block device, a FIFO nobody reads: before the work
    _set_threads(args)
    check_device(args.device)
    from ner_app.bilm.embed import embed_file, inference_autocast
    from ner_app.predict.api import SHIPPED_BILM, bilm_files, shipped

    if (args.options is None) != (args.weights is None):
        raise NerAppError("--options and --weights go together (leave both out for the shipped biLM)")
    if args.options is None:
        args.options, args.weights = bilm_files(shipped(SHIPPED_BILM, "biLM (--options and --weights)"))
    bilm = load_bilm(args.options, args.weights, stateful=args.stateful, random_fills=False)
    if args.max_stream_positions < 2:
        raise NerAppError(
            f"--max-stream-positions: expected at least 2 (<S> and </S>), found {args.max_stream_positions}"
        )
    if args.outputs is not None:  # TF-Hub ELMo's named outputs (docs/serving.md)
        from ner_app.bilm.embed_outputs import embed_outputs_file, parse_mix, parse_outputs

        names = parse_outputs(args.outputs, bilm.num_layers - 1)
        mix = parse_mix(args.scalar_mix, args.gamma, bilm.num_layers)
        with inference_autocast(args.device, args.precision):
            count = embed_outputs_file(
                bilm,
                args.input,
                args.output,
                names,
                mix,
                batch_size=args.batch_size,
                device=args.device,
                context=args.context,
                max_stream_positions=args.max_stream_positions,
                tokenize_lines=args.tokenize,
                max_tokens=args.max_tokens,
            )
    elif args.scalar_mix is not None or args.gamma is not None:
        raise NerAppError("--scalar-mix and --gamma go with --outputs (the default layout has no mix)")
    else:
        count = embed_file(
            bilm,
            args.input,
            args.output,
            batch_size=args.batch_size,
            device=args.device,
            context=args.context,
            max_stream_positions=args.max_stream_positions,
            precision=args.precision,
            tokenize_lines=args.tokenize,
            max_tokens=args.max_tokens,
        )
    where = "standard output" if args.output == "-" else args.output
    print(f"wrote {count} sentences to {where}", file=sys.stderr)
    return 0


def export(args: argparse.Namespace) -> int:
    if args.onnx:
        if args.checkpoint is not None:
            raise NerAppError(
                "--onnx converts an export folder (--model DIR), not a checkpoint: export the checkpoint first "
                "(export --checkpoint CKPT --output DIR)"
            )
        from ner_app.onnx.export import export_onnx_from, require_onnxruntime

        require_onnxruntime()  # before the shipped model is looked for: the missing package is the first fix
        model = _model(args)
        out = export_onnx_from(model, args.output, args.quantize)
        kind = "ONNX" if args.quantize is None else f"ONNX ({args.quantize} weights)"
        print(f"exported {model} to {kind} in {out}", file=sys.stderr)
        return 0
    if args.quantize is not None:
        raise NerAppError("--quantize goes with --onnx (it quantizes the ONNX graphs)")
    if args.checkpoint is None or args.model is not None:
        raise NerAppError(
            "export: give --checkpoint CKPT, or --onnx [--model EXPORT_DIR] to convert an export"
        )
    from ner_app.train.from_checkpoint import export_checkpoint

    out = export_checkpoint(args.checkpoint, args.output)
    print(f"exported {args.checkpoint} to {out}", file=sys.stderr)
    return 0


def _check_predict_output(output: str, source: str, fmt: OutputFormat) -> None:
    """Before the model loads: --output is not the input (nor a folder holding it), and a file format's output
    is a file name, a folder format's a folder that is absent, empty or an earlier output of the format."""
    from ner_app.files import STDOUT, check_output, refuse_foreign

    out = Path(output)
    if source != "-" and Path(source).exists():
        inside = out.resolve() == Path(source).resolve() or out.resolve() in Path(source).resolve().parents
        if inside:
            raise NerAppError(f"--output {output}: is the input (or holds it); name another path")
    if fmt.files is not None:
        if output == STDOUT:
            raise NerAppError(f"--format {fmt.name} writes a folder of files; --output names a folder, not -")
        refuse_foreign(out, fmt.is_ours or (lambda _: False), f"a folder of predict --format {fmt.name}")
    else:
        check_output(output, "--output")


def predict(args: argparse.Namespace) -> int:
    from ner_app.report.formats import Target, output_format, write_output
    from ner_app.report.predictions_html import entity_types
    from ner_app.text.lines import decoded_lines

    fmt = output_format(args.format)
    if fmt.files is not None and args.output is None:
        raise NerAppError(f"--format {fmt.name} writes a folder of files: name it with --output DIR")
    if args.output is not None:
        _check_predict_output(args.output, args.input, fmt)
    from ner_app.text.readings import ReadingOptions

    options = ReadingOptions(args.min_score, args.alternatives, args.flag_missed)
    if fmt.reads == "conll" and options != ReadingOptions():
        raise NerAppError(
            f"--min-score, --alternatives and --flag-missed report on entities: they go with --format jsonl or "
            f"html, not {args.format}"
        )
    if args.workers is not None and args.workers > 1:  # N processes: cli/predict_workers.py
        from ner_app.cli.predict_workers import predict_in_workers

        return predict_in_workers(args, fmt, str(_model(args)), options)  # torch only in the workers
    from ner_app.predict.predictor import Predictor, tag_conll

    _set_threads(args)
    check_device(args.device)
    from ner_app.text.reliability import note_uncalibrated

    model = _model(args)
    predictor = Predictor.from_export(
        model, device=args.device, batch_size=args.batch_size, max_tokens=args.max_tokens
    )
    note_uncalibrated(predictor.spec.calibration is not None, str(model))
    name = "<stdin>" if args.input == "-" else args.input
    if args.input != "-" and Path(args.input).is_dir():
        raise NerAppError(f"--input {args.input}: is a folder, expected a text file or -")
    target = Target(tuple(entity_types(predictor.tags.itos)), name, model.resolve().name)
    source = sys.stdin.buffer if args.input == "-" else open(args.input, "rb")  # noqa: SIM115
    with source:
        lines = decoded_lines(source, name)  # split on \n only: one output per input line
        records = (
            tag_conll(predictor, lines)
            if fmt.reads == "conll"
            else predictor.tag_lines(lines, options=options)
        )
        if args.output is not None:
            write_output(args.output, fmt, records, target)
            print(f"wrote {args.output}", file=sys.stderr)
            return 0
        for piece in fmt.write(records, target):
            sys.stdout.write(piece)
    return 0


def evaluate(args: argparse.Namespace) -> int:
    import json

    from ner_app.files import STDOUT, check_output, output_target
    from ner_app.predict.evaluate import case_view_table, evaluate_file, score_table
    from ner_app.predict.predictor import Predictor
    from ner_app.report.formats import FORMATS, Target, write_output
    from ner_app.text.case import CASE_VIEWS

    _set_threads(args)
    check_device(args.device)
    check_gold_file(args.input)
    if args.predictions is not None:
        out = Path(args.predictions)
        if out.is_dir():
            raise NerAppError(f"--predictions {out}: is a folder, expected a file name")
        if args.predictions != STDOUT and out.exists() and out.resolve() == Path(args.input).resolve():
            raise NerAppError(f"--predictions {out}: is the gold file --input; name another file")
        check_output(args.predictions, "--predictions")
    # with --predictions -, standard output holds the predictions alone and the scores go to stderr
    to_stdout = args.predictions is not None and output_target(args.predictions)[0] == "stdout"
    scores = sys.stderr if to_stdout else sys.stdout
    model = _model(args)
    predictor = Predictor.from_export(
        model, device=args.device, batch_size=args.batch_size, max_tokens=args.max_tokens
    )
    result, items = evaluate_file(predictor, args.input, CASE_VIEWS if args.case_views else CASE_VIEWS[:1])
    result["model"] = str(model)
    if args.predictions is not None:
        write_output(args.predictions, FORMATS["conll"], items, Target())
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
