"""The former home of ``main``, kept so that ``from ner_app.cli.commands import main`` still works: the command
line's ``main`` is ``cli/main.py``'s."""

from __future__ import annotations

from ner_app.cli.main import main

__all__ = ["main"]
