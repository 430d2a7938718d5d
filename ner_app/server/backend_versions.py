"""The model versions of the Label Studio backend, kept in its work folder: ``state.json`` names each version
(its number, export folder, name, held-out F1 and number of training tasks), the one served and the project;
``versions/vN/`` holds version N's training data, log and run. A restarted backend reads them back; a folder it
did not make, or the versions of another model, are refused in one line."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ner_app.errors import NerAppError
from ner_app.files import write_text
from ner_app.records import read_json

STATE = "state.json"
STATE_FORMAT = "ner_app.label_studio_backend/1"
MAX_STATE_BYTES = 1 << 24


@dataclass(frozen=True)
class Version:
    """A model the backend served or serves: its number (0: the one it started from), export folder, version
    name, and the held-out F1 and the number of tasks it was trained on (None, 0 for version 0)."""

    number: int
    export: str
    model_version: str
    heldout_f1: float | None = None
    trained_on: int = 0


_FIELDS: dict[str, tuple[type, ...]] = {
    "number": (int,),
    "export": (str,),
    "model_version": (str,),
    "heldout_f1": (float, int, type(None)),
    "trained_on": (int,),
}


@dataclass
class Versions:
    """Every version, the number of the one served, and the project (None until one connects)."""

    workdir: Path
    all: list[Version]
    serving: int
    project: int | None = None

    @property
    def served(self) -> Version:
        return next(v for v in self.all if v.number == self.serving)

    def next_folder(self) -> tuple[int, Path]:
        """The number and folder of the next version: past every version and every folder a failed training
        left (a number is never used twice)."""
        root = self.workdir / "versions"
        taken = [v.number for v in self.all]
        taken += [int(p.name[1:]) for p in root.glob("v*") if p.name[1:].isdigit()] if root.is_dir() else []
        number = max(taken) + 1
        return number, root / f"v{number}"

    def save(self) -> None:
        state = {
            "format": STATE_FORMAT,
            "project": self.project,
            "serving": self.serving,
            "versions": [asdict(v) for v in self.all],
        }
        write_text(self.workdir / STATE, json.dumps(state, indent=2) + "\n")

    @classmethod
    def open(cls, workdir: Path, first: Version) -> Versions:
        """The versions of ``workdir``, or, in a new or empty folder, ``first`` alone (written at once)."""
        if workdir.exists() and not workdir.is_dir():
            raise NerAppError(f"--workdir {workdir}: not a folder")
        path = workdir / STATE
        if not path.exists():
            if workdir.is_dir() and any(workdir.iterdir()):
                raise NerAppError(
                    f"--workdir {workdir}: a folder ner-app label-studio did not make (no {STATE}); give a new "
                    "or empty folder"
                )
            workdir.mkdir(parents=True, exist_ok=True)
            versions = cls(workdir, [first], first.number)
            versions.save()
            return versions
        versions = cls(workdir, *_read_state(path))
        if versions.all[0].export != first.export:
            raise NerAppError(
                f"--workdir {workdir}: holds the versions of {versions.all[0].export}, not of {first.export}; "
                "give another --workdir"
            )
        return versions


def _read_state(path: Path) -> tuple[list[Version], int, int | None]:
    """The versions a state file records, each field of its type, the one served and the project; one line
    naming the file otherwise."""
    state: Any = read_json(path, MAX_STATE_BYTES, what="the backend's state file")
    if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
        raise NerAppError(f"{path}: not a state file of ner-app label-studio; give another --workdir")
    records = state.get("versions")
    records = records if isinstance(records, list) else []
    good = bool(records) and all(
        isinstance(r, dict)
        and set(r) == set(_FIELDS)
        and all(isinstance(r[k], t) for k, t in _FIELDS.items())
        for r in records
    )
    if not good or state.get("serving") not in [r["number"] for r in records]:
        raise NerAppError(
            f"{path}: not a state file of ner-app label-studio (its versions are damaged); give another --workdir"
        )
    project = state.get("project")
    if project is not None and (not isinstance(project, int) or isinstance(project, bool)):
        raise NerAppError(f"{path}: not a state file of ner-app label-studio (project {str(project)[:40]!r})")
    return [Version(**r) for r in records], state["serving"], project
