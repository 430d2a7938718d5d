"""The commands of ``ner-app``, in the order ``--help`` lists them: each name's module in ``ner_app/cli/``
holds its parser (``add_parser(subparsers)``) and its handler (``run(args) -> int``). The parser tree and
``main`` are built from this table alone; adding a command is one module and one row here."""

from __future__ import annotations

import importlib
from types import ModuleType

COMMANDS: tuple[tuple[str, str], ...] = (
    ("train", "train"),
    ("distill", "distill"),
    ("embed", "embed"),
    ("export", "export"),
    ("predict", "predict"),
    ("evaluate", "evaluate"),
    ("calibrate", "calibrate"),
    ("compare", "compare"),
    ("pretrain-bilm", "pretrain_bilm"),
    ("bilm-perplexity", "bilm_perplexity"),
    ("report", "report"),
    ("download-elmo", "download_elmo"),
    ("serve", "serve"),
    ("label-studio", "label_studio"),
    ("convert", "convert"),
    ("check-data", "check_data"),
    ("split", "split"),
    ("find-threshold", "find_threshold"),
    ("select", "select"),
    ("benchmark", "benchmark"),
)


def command_names() -> list[str]:
    return [name for name, _ in COMMANDS]


def command_module(name: str) -> ModuleType:
    """The module of command ``name`` (its top level imports nothing heavy: torch, Lightning, LitServe...)."""
    return importlib.import_module(f"ner_app.cli.{dict(COMMANDS)[name]}")
