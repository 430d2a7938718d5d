"""``--help`` of ``ner-app`` and of every registered command works where torch, Lightning and LitServe cannot be
imported: the command modules import nothing heavy at their top level, and every default ``--help`` shows
comes from a module without them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ner_app.cli.registry import command_names

ROOT = Path(__file__).resolve().parents[2]
BLOCKED = ("torch", "lightning", "pytorch_lightning", "lightning_fabric", "litserve")

pytestmark = pytest.mark.system  # every test starts a Python process
BLOCKER = f"""
import sys

BLOCKED = {BLOCKED!r}


class _Blocked:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{{name}} is blocked here: --help must not import it")
        return None


sys.meta_path.insert(0, _Blocked())
"""


@pytest.fixture(scope="module")
def blocked_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of a Python that cannot import ``BLOCKED`` (a ``sitecustomize.py`` on PYTHONPATH)."""
    folder = tmp_path_factory.mktemp("blocker")
    (folder / "sitecustomize.py").write_text(BLOCKER, encoding="utf-8")
    path = os.pathsep.join(p for p in (str(folder), str(ROOT), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path}


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ner_app", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=ROOT,
    )


def test_the_blocker_blocks(blocked_env: dict[str, str]) -> None:
    """Without it the test below could not fail: here a command that imports torch fails."""
    done = subprocess.run(
        [sys.executable, "-c", "import torch"], capture_output=True, text=True, env=blocked_env, timeout=60
    )
    assert done.returncode != 0 and "blocked here" in done.stderr


def test_main_help_without_torch(blocked_env: dict[str, str]) -> None:
    done = _run(blocked_env, "--help")
    assert done.returncode == 0, done.stderr
    assert all(name in done.stdout for name in command_names())


@pytest.mark.parametrize("command", command_names())
def test_command_help_without_torch(blocked_env: dict[str, str], command: str) -> None:
    done = _run(blocked_env, command, "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: ner-app {command}") and "options:" in done.stdout
    assert "%(default)s" not in done.stdout and "<ner_app" not in done.stdout  # defaults shown as values


def test_every_owned_default_resolves_without_torch(blocked_env: dict[str, str]) -> None:
    """Each ``Owned`` default of every command, the ones ``--help`` does not show included, is read from a module
    that imports no torch, Lightning or LitServe."""
    code = (
        "import argparse\n"
        "from ner_app.cli.arguments import Owned\n"
        "from ner_app.cli.parser import build_parser\n"
        "def walk(parser):\n"
        "    for action in parser._actions:\n"
        "        if isinstance(action, argparse._SubParsersAction):\n"
        "            for sub in action.choices.values():\n"
        "                yield from walk(sub)\n"
        "        elif isinstance(action.default, Owned):\n"
        "            yield action.default\n"
        "owned = list(walk(build_parser()))\n"
        "print(len(owned), all(o.value() is not None for o in owned))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=blocked_env, timeout=60, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    count, resolved = done.stdout.split()
    assert int(count) >= 15 and resolved == "True"
