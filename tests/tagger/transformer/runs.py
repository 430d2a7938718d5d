"""Tiny training runs with the transformer feature and the processes that use them, for this folder's tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
TINY = ROOT / "tests" / "data" / "tiny_conll"
TEXTS = ["Peter Blackburn met the EU in Germany .", "", "British lamb ."]


def offline(**extra: str) -> dict[str, str]:
    """The environment of a child process: the hub offline, this checkout importable, ``extra`` on top (read at
    call time, so that the suite's own cache folder is inherited)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    return {**env, **extra}


def train_args(out: Path, folder: Path, *extra: str) -> list[str]:
    """train.py's arguments for a tiny run with words, chars and the encoder in ``folder``."""
    return [
        "--config",
        str(ROOT / "configs" / "tiny.yaml"),
        f"output_dir={out}",
        f"data.dir={TINY}",
        f"elmo.cache_dir={out.parent / 'cache'}",
        "model.features=[words,chars,transformer]",
        f"transformer.folder={folder}",
        *extra,
    ]


def one_error_line(result: subprocess.CompletedProcess, *needles: str) -> None:
    """The process failed with exit code 2 and one line on stderr holding each of ``needles``."""
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and lines[0].startswith("error:"), result.stderr[-2000:]
    for needle in needles:
        assert needle in lines[0], lines[0]


def cli(
    *args: str, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """``python -m ner_app ARGS`` in its own process (``env``: ``offline()`` unless given)."""
    return subprocess.run(
        [sys.executable, "-m", "ner_app", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env or offline(),
        cwd=ROOT,
    )


def train_process(
    out: Path, *overrides: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """``train.py`` on the tiny config with the transformer feature, in its own process (what a user's shell
    sees: the exit code and stderr); ``overrides`` name its encoder."""
    args = ["--config", str(ROOT / "configs" / "tiny.yaml"), f"output_dir={out}", f"data.dir={TINY}"]
    args += ["model.features=[words,chars,transformer]", *overrides]
    return subprocess.run(
        [sys.executable, "train.py", *args], capture_output=True, text=True, cwd=ROOT, env=env or offline()
    )
