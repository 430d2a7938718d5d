"""When stderr is not a terminal, progress is plain lines: no carriage returns, one line per epoch or per 10%."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

from ner_app.progress import LineProgress, track

ROOT = Path(__file__).resolve().parents[2]


def run_cli(tmp_path: Path, *args: str) -> tuple[bytes, bytes]:
    """Run ``python -m ner_app ARGS`` with stdout and stderr as pipes (as under nohup, cron or a job queue)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "ner_app", *args]
    result = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, timeout=300)
    assert result.returncode == 0, result.stderr.decode()[-3000:]
    return result.stdout, result.stderr  # bytes: text mode would turn a "\r" into a newline


def test_line_progress_reports_each_tenth_once() -> None:
    stream = io.StringIO()
    bar = LineProgress(1000, "work", unit="B", stream=stream)
    for _ in range(1000):
        bar.update(1)
    bar.close()
    lines = stream.getvalue().splitlines()
    assert [re.match(r"work: (\d+)% ", line).group(1) for line in lines] == [
        str(10 * k) for k in range(1, 11)
    ]
    stream = io.StringIO()
    bar = LineProgress(None, "unsized", stream=stream)  # no total: only the closing line
    bar.update(5)
    bar.close()
    bar.close()
    assert stream.getvalue().startswith("unsized: 5 it done (") and stream.getvalue().count("\n") == 1


def test_track_yields_every_item(capsys) -> None:
    assert list(track(range(7), "seven")) == list(range(7))
    err = capsys.readouterr().err  # pytest's capture is not a terminal
    assert "\r" not in err and err.splitlines()[-1].startswith("seven: 100% (7 it of 7 it)")
    assert list(track(range(3), "silent", enabled=False)) == [0, 1, 2] and capsys.readouterr().err == ""


def test_training_log_has_one_line_per_epoch(tmp_path: Path) -> None:
    out, err = run_cli(
        tmp_path, "train", "--config", str(ROOT / "configs" / "tiny.yaml"), f"output_dir={tmp_path / 'run'}",
        f"elmo.cache_dir={tmp_path / 'cache'}", "trainer.max_epochs=3", "trainer.enable_progress_bar=true",
        "trainer.threads=1",
    )  # fmt: skip
    assert b"\r" not in out and b"\r" not in err
    text = err.decode()
    epochs = re.findall(r"^epoch (\d+)/3 step \d+: .*train_loss .*val_f1 ", text, re.M)
    assert epochs == ["1", "2", "3"]
    fill = re.findall(r"^biLM: ", text, re.M)  # the layer cache fill, at most once per 10%
    assert 1 <= len(fill) <= 10
    # Lightning's warnings that are intended here (the frozen biLM in eval mode) stay out of the log
    assert "in eval mode" not in text and "LeafSpec" not in text and "litlogger" not in text, text
    assert "multiple `ModelCheckpoint`" not in text, text  # the best checkpoint is named, not asked for
    # ... and so does the "Checkpoint directory ... exists and is not empty" of every --resume
    _, err = run_cli(
        tmp_path, "train", "--config", str(ROOT / "configs" / "tiny.yaml"), f"output_dir={tmp_path / 'run'}",
        f"elmo.cache_dir={tmp_path / 'cache'}", "trainer.max_epochs=4", "trainer.enable_progress_bar=true",
        "trainer.threads=1", "--resume",
    )  # fmt: skip
    assert re.findall(r"^epoch (\d+)/4 ", err.decode(), re.M) == ["4"]
    assert "is not empty" not in err.decode(), err.decode()


def test_pretraining_log_has_one_line_per_tenth_of_the_steps(tmp_path: Path) -> None:
    words = "the cat sees a dog . a big fish eats the small cat .".split()
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(" ".join(words[i:] + words[:i]) + "\n" for i in range(len(words))) * 20)
    out, err = run_cli(
        tmp_path, "pretrain-bilm", "--config", str(ROOT / "configs" / "bilm_tiny.yaml"),
        f"output_dir={tmp_path / 'run'}", f"data.train={corpus}", f"data.heldout=[{corpus}]",
        "data.max_train_tokens=null", "data.vocab_size=20", "train.max_steps=20", "train.batch_size=4",
        "train.n_negative_samples=4", "train.enable_progress_bar=true", "--threads", "1",
    )  # fmt: skip
    assert b"\r" not in out and b"\r" not in err
    steps = re.findall(r"^step (\d+)/20 \((\d+)%\): .*train_loss ", err.decode(), re.M)
    assert steps == [(str(2 * k), str(10 * k)) for k in range(1, 11)]
    assert "weights_only" not in err.decode() and "LeafSpec" not in err.decode(), err.decode()
