"""The loop with the real Label Studio (the PyPI package ``label-studio``; skipped without it): a project from
the named-entity template, tasks imported, the backend connected, predictions retrieved into the tasks,
annotations submitted through Label Studio's API, and a new model version seen in Label Studio's predictions.
``benchmarks/label_studio_live.py`` at tiny scale."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ner_app.text.conll import read_conll
from tests.helpers import REPO, TINY
from tests.serve.label_studio.tasks import free_port

pytestmark = pytest.mark.slow
LABEL_STUDIO = os.environ.get("LABEL_STUDIO_BIN") or shutil.which("label-studio")


@pytest.mark.skipif(LABEL_STUDIO is None, reason="label-studio is not installed (pip install label-studio)")
def test_the_loop_with_label_studio(weak_model: Path, continue_config: Path, tmp_path: Path) -> None:
    # 15 distinct sentences: the tiny sample's 5, each three times with a number of its own after it
    base = [s for s in read_conll(TINY / "train.txt") if s.tokens]
    rows = [
        "".join(
            f"{t} {g}\n" for t, g in zip([*s.tokens, "(", str(i), ")"], [*s.tags, "O", "O", "O"], strict=True)
        )
        for i, s in enumerate(base * 3)
    ]
    source = tmp_path / "sentences.txt"
    source.write_text("\n".join(rows))
    out = tmp_path / "out"
    command = [
        sys.executable, "-m", "benchmarks.label_studio_live", "--source", str(source), "--tasks", "15",
        "--rounds", "10,15", "--model", str(weak_model), "--config", str(continue_config), "--max-epochs", "20",
        "--heldout", "0.3", "--min-heldout", "1", "--latency-repeats", "3", "--port", str(free_port()),
        "--backend-port", str(free_port()), "--label-studio-bin", str(LABEL_STUDIO), "--out", str(out),
    ]  # fmt: skip
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (record,) = [json.loads(p.read_text()) for p in out.glob("*.json")]
    first = record["first_prediction_versions"]
    assert len(first) == 1 and first[0].startswith("run-")  # the first model's predictions in the tasks
    assert [r["annotated"] for r in record["rounds"]] == [10, 15]
    assert record["served"].startswith("run-v")
    assert record["served"] in record["predictions_after"]  # Label Studio shows the new version's predictions
    assert record["backend_predict_one_task_median_s"] > 0
