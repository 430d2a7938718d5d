"""The tree is the flow: a room imports only the rooms before it, and no two modules import each other."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "ner_app"
# The ground floor (modules at the package root), then the rooms in the order of the flow.
ROOMS = ["", "config", "text", "bilm", "tagger", "runtime", "train", "pretrain", "serve", "report", "cli"]
GROUND = {"__init__", "__main__", "errors", "limits", "files", "progress", "records"}


def _module(path: Path) -> str:
    return ".".join(("ner_app", *path.relative_to(PACKAGE).with_suffix("").parts))


def _room(module: str) -> str:
    if module == "ner_app.__main__":  # the door of ``python -m ner_app``: it opens onto the command line
        return "cli"
    if module == "ner_app.__init__":  # the door of ``import ner_app``: it opens onto the Python API (serve)
        return "serve"
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
