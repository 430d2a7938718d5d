"""``main``: the command line parsed (``cli/parser.py``) and the command's handler run under one error policy."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from ner_app.cli.arguments import OwnedNamespace
from ner_app.cli.parser import build_parser
from ner_app.cli.registry import COMMANDS, command_module
from ner_app.errors import NerAppError, run_reporting_errors

# What pip install 'ner_app[train]' adds to the torch-free core: a command that needs one says so in one line
TRAIN_PACKAGES = (
    "torch",
    "pytorch_lightning",
    "lightning_fabric",
    "datasets",
    "h5py",
    "safetensors",
    "matplotlib",
)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    named = command_module(argv[0]) if argv and argv[0] in dict(COMMANDS) else None
    alone = getattr(named, "parse_alone", None)
    if alone is not None:  # a command with a parser of its own (train: overrides around its options)
        args = alone(argv[1:])
    else:
        # the command's own arguments only: no other command's module is imported
        only = argv[0] if named is not None else None
        args = build_parser(only).parse_args(argv, namespace=OwnedNamespace())
    handler = command_module(args.command).run

    def run() -> int:
        try:
            return int(handler(args))
        except ModuleNotFoundError as err:  # the torch-free core: a torch export, training, export --onnx
            if (err.name or "").split(".")[0] not in TRAIN_PACKAGES:
                raise
            raise NerAppError(
                f"{args.command} needs {err.name}, which is not installed here (the core install runs ONNX "
                "folders only): pip install 'ner_app[train]'"
            ) from None

    # One policy for every command: a user's mistake is one line and exit 2, a bug keeps its traceback.
    return run_reporting_errors(run)


if __name__ == "__main__":
    sys.exit(main())
