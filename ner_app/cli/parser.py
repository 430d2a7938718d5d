"""The command line's argparse tree (``python -m ner_app --help``), built from the registry
(``cli/registry.py``): each command's module adds its own parser."""

from __future__ import annotations

import argparse

from ner_app.cli.registry import COMMANDS, command_module


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """Every command of ``ner-app``, in the registry's order; with ``only``, that command's arguments alone
    (the others are named, so that a mistyped command still lists them, but their modules are not imported)."""
    parser = argparse.ArgumentParser(
        prog="ner-app", description="ELMo BiLSTM-CRF named-entity tagging (also: python -m ner_app)."
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, _ in COMMANDS:
        if only in (None, name):
            command_module(name).add_parser(commands)
        else:
            commands.add_parser(name)
    return parser
