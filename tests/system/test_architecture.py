"""The tree is the flow: a room imports only the rooms before it, and no two modules import each other."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "ner_app"
# The ground floor (modules at the package root), then the rooms in the order of the flow.
ROOMS = [
    "",
    "config",
    "text",
    "bilm",
    "tagger",
    "onnx",
    "runtime",
    "train",
    "pretrain",
    "predict",
    "decisions",
    "server",
    "report",
    "jobs",
    "cli",
]
GROUND = {
    "__init__",
    "__main__",
    "errors",
    "limits",
    "files",
    "progress",
    "records",
}  # at most 5 besides the doors
# Pairs of rooms the flow would allow but the design forbids, and why.
FORBIDDEN = {
    (room, "train"): "prediction never imports training (the decode math is the model's, in tagger/)"
    for room in ("onnx", "predict", "decisions", "server")
}


def _module(path: Path) -> str:
    return ".".join(("ner_app", *path.relative_to(PACKAGE).with_suffix("").parts))


def _room(module: str) -> str:
    if module == "ner_app.__main__":  # the door of ``python -m ner_app``: it opens onto the command line
        return "cli"
    if module == "ner_app.__init__":  # the door of ``import ner_app``: it opens onto the Python API (predict)
        return "predict"
    parts = module.split(".")
    return parts[1] if len(parts) > 2 else ""


def _imports(path: Path) -> set[str]:
    """Every ``ner_app`` module that ``path`` imports, at module level or inside functions."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{a.name}" for a in node.names]
            found.update(n if _known(n) else node.module for n in names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level:
            raise AssertionError(f"{path}: relative import; write 'from ner_app...' in full")
    return {m for m in found if m.split(".")[0] == "ner_app"}


def _known(module: str) -> bool:
    rel = Path(*module.split(".")[1:])
    return (PACKAGE / rel).with_suffix(".py").is_file() or (PACKAGE / rel / "__init__.py").is_file()


def _graph() -> dict[str, set[str]]:
    return {_module(p): _imports(p) for p in sorted(PACKAGE.rglob("*.py"))}


def test_every_module_lives_in_a_room() -> None:
    loose = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem not in GROUND)
    assert not loose, f"modules at the package root outside the ground floor: {loose}"
    for folder in sorted(p for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"):
        assert folder.name in ROOMS, f"{folder}: not a room of the flow {ROOMS}"


def test_a_room_imports_only_rooms_before_it() -> None:
    upward = []
    for module, imported in _graph().items():
        here = ROOMS.index(_room(module))
        for target in imported:
            if ROOMS.index(_room(target)) > here:
                upward.append(f"{module} imports {target}")
    assert not upward, "imports against the flow:\n" + "\n".join(sorted(upward))


def test_forbidden_room_pairs() -> None:
    found = []
    for module, imported in _graph().items():
        for target in imported:
            why = FORBIDDEN.get((_room(module), _room(target)))
            if why:
                found.append(f"{module} imports {target}: {why}")
    assert not found, "\n".join(sorted(found))


def _trainers(path: Path) -> list[int]:
    """Lines of ``path`` that call a ``Trainer(...)`` (``pl.Trainer(`` or a bare ``Trainer(``)."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call)
        and (getattr(node.func, "attr", None) == "Trainer" or getattr(node.func, "id", None) == "Trainer")
    ]


def test_one_trainer_builder() -> None:
    """Every Lightning Trainer is made in runtime/ (``runtime/trainer.py``), none beside it."""
    calls = [
        f"{p.relative_to(PACKAGE.parent)}:{line}"
        for p in sorted(PACKAGE.rglob("*.py"))
        if p.parent.name != "runtime"
        for line in _trainers(p)
    ]
    assert not calls, "Trainer(...) outside ner_app/runtime/: " + ", ".join(calls)
    assert _trainers(PACKAGE / "runtime" / "trainer.py"), "the checker found no trainer in the builder itself"


# What the predict, evaluate and embed commands and the Python API import (their handlers' imports included).
LIGHT_PATHS = [
    "ner_app",
    "ner_app.cli.main",
    "ner_app.cli.predict",
    "ner_app.cli.evaluate",
    "ner_app.cli.embed",
    "ner_app.jobs.predict",
    "ner_app.report.formats",
    "ner_app.report.predictions_html",
    "ner_app.predict.predictor",
    "ner_app.predict.api",
    "ner_app.bilm.embed",
    "ner_app.bilm.embed_outputs",
    "ner_app.predict.evaluate",
    "ner_app.onnx.predictor",
    "ner_app.text.lines",
    "ner_app.bilm.weights",
]
HEAVY = {"pytorch_lightning", "lightning", "lightning_fabric", "torchmetrics", "litserve", "matplotlib"}


def _imported_heavy(modules: list[str]) -> list[str]:
    """The ``HEAVY`` packages in ``sys.modules`` of a fresh interpreter after importing ``modules``."""
    code = (
        "import importlib, sys\n"
        "for name in sys.argv[1:]:\n    importlib.import_module(name)\n"
        f"print(' '.join(sorted({{m.split('.')[0] for m in sys.modules}} & set({sorted(HEAVY)!r}))))"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(PACKAGE.parent), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run([sys.executable, "-c", code, *modules], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


@pytest.mark.system
def test_predict_and_embed_import_no_lightning() -> None:
    """Prediction and embedding start without Lightning (or matplotlib): it is training's, and slow to import."""
    assert _imported_heavy(LIGHT_PATHS) == []


@pytest.mark.system
@pytest.mark.parametrize("module", ["ner_app.train.module", "ner_app.report.run_report"])
def test_the_import_check_sees_a_heavy_import(module: str) -> None:
    assert _imported_heavy([module])


def test_no_import_cycle() -> None:
    graph = {m: {t for t in ts if t in _graph_keys()} for m, ts in _graph().items()}
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        if module in path:
            cycle = path[path.index(module) :] + [module]
            raise AssertionError("import cycle: " + " -> ".join(cycle))
        if module in done:
            return
        for target in sorted(graph[module]):
            visit(target, [*path, module])
        done.add(module)

    for module in sorted(graph):
        visit(module, [])


def _graph_keys() -> set[str]:
    return {_module(p) for p in PACKAGE.rglob("*.py")}


def test_the_checker_sees_an_upward_import(tmp_path: Path) -> None:
    """The walker itself: an import of a later room is found, in a function body too."""
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from ner_app.cli.parser import build_parser\n", encoding="utf-8")
    assert _imports(source) == {"ner_app.cli.parser"}
    assert _room("ner_app.cli.parser") == "cli" and _room("ner_app.errors") == ""
