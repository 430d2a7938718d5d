"""One training of the Label Studio backend: the annotated tasks split into training and held-out tasks by
task id, written as a Label Studio export, ``train --init-from`` the serving model in a child process, and the
held-out tasks as gold for judging the result (``label_studio_backend.py`` decides what is served)."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ner_app.errors import NerAppError
from ner_app.files import write_text

LOG_TAIL_BYTES = 4096


def held_out(task_id: Any, share: float) -> bool:
    """Whether the task of this id is held out: a fixed hash of the id, so the answer never changes, and a
    larger share holds out a superset."""
    digest = hashlib.sha256(str(task_id).encode()).digest()
    return int.from_bytes(digest[:4], "big") < share * (1 << 32)


def annotated(task: dict[str, Any]) -> bool:
    """A task with an annotation that was not skipped."""
    annotations = task.get("annotations")
    return isinstance(annotations, list) and any(
        isinstance(a, dict) and not a.get("was_cancelled") for a in annotations
    )


@dataclass(frozen=True)
class TrainingSpec:
    """How the backend trains: the config, and the keys it sets on every run."""

    config: Path
    max_epochs: int = 10
    threads: int = 1
    seed: int = 13
    labels: dict[str, str] | None = None  # project label -> entity type
    partial: bool = False
    timeout: float = 3600.0


class Training:
    """A child ``train`` process, stoppable from another thread (the server stopping)."""

    def __init__(self, spec: TrainingSpec) -> None:
        self.spec = spec
        self._process: subprocess.Popen[bytes] | None = None

    @staticmethod
    def write_data(folder: Path, train: list[dict[str, Any]], heldout: list[dict[str, Any]]) -> Path:
        """``train.json``, and the held-out tasks as ``valid.json`` and ``test.json``, in ``folder/data``."""
        data = folder / "data"
        data.mkdir(parents=True, exist_ok=True)
        for name, part in (("train", train), ("valid", heldout), ("test", heldout)):
            write_text(data / f"{name}.json", json.dumps(part, ensure_ascii=False))
        return data

    def run(self, folder: Path, data: Path, start: Path) -> Path:
        """Train from the export ``start`` on ``data`` into ``folder/run``; its export, or ``NerAppError``
        with the last line ``train`` wrote."""
        run, spec = folder / "run", self.spec
        command = [
            sys.executable, "-m", "ner_app", "train", "--config", str(spec.config.resolve()),
            "--init-from", str(start.resolve()),
            f"data.dir={json.dumps(str(data.resolve()))}", f"output_dir={json.dumps(str(run.resolve()))}",
            "data.format=labelstudio", f"trainer.max_epochs={spec.max_epochs}", f"trainer.threads={spec.threads}",
            f"seed={spec.seed}",
        ]  # fmt: skip
        if spec.labels:
            command.append(f"data.labels={json.dumps(','.join(f'{k}={v}' for k, v in spec.labels.items()))}")
        if spec.partial:
            command.append("data.outside=unknown")
        log = folder / "train.log"
        with open(log, "wb") as out:
            process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
            self._process = process
            try:
                code = process.wait(timeout=spec.timeout)
            except subprocess.TimeoutExpired:
                self.stop()
                raise NerAppError(
                    f"training took longer than {spec.timeout:g} s (--train-timeout); stopped"
                ) from None
            finally:
                self._process = None
        if code != 0:
            raise NerAppError(f"train exited with {code}: {_last_line(log)} (log: {log})")
        return run / "export"

    def heldout_gold(self, folder: Path, heldout: Path) -> Path:
        """The held-out tasks as a CoNLL file, read by the one reader training uses."""
        from ner_app.text.annotations.convert import convert_files, write_converted
        from ner_app.text.annotations.format import Options
        from ner_app.text.annotations.model import Audit
        from ner_app.text.annotations.resolve import Policy

        policy = Policy(self.spec.labels or {}, None)
        converted = convert_files("labelstudio", [heldout], Options(policy), Audit())
        gold = folder / "heldout.conll"
        write_converted(gold, converted)
        return gold

    def stop(self) -> None:
        """Stop the child process, if one runs: SIGTERM to its group, SIGKILL after 30 s."""
        process = self._process
        if process is None or process.poll() is not None:
            return
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _last_line(path: Path) -> str:
    """The last non-empty line of a log (what ``train`` said when it failed), bounded."""
    with open(path, "rb") as f:
        f.seek(max(0, os.path.getsize(path) - LOG_TAIL_BYTES))
        lines = [line.strip() for line in f.read().decode("utf-8", "replace").splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no output"
