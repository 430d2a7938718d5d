"""When stderr is not a terminal, progress is plain lines: no carriage returns, a line per 10% (of an epoch or of
the steps); and the rest of what a training prints there (its tables, Lightning's lines, the report last)."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

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


@pytest.mark.system
@pytest.mark.slow
def test_training_log_has_a_line_per_tenth_of_an_epoch(tmp_path: Path) -> None:
    out, err = run_cli(
        tmp_path,
        "train",
        "--config",
        str(ROOT / "configs" / "tiny.yaml"),
        f"output_dir={tmp_path / 'run'}",
        f"elmo.cache_dir={tmp_path / 'cache'}",
        "trainer.max_epochs=3",
        "trainer.enable_progress_bar=true",
        "trainer.threads=1",
    )
    assert b"\r" not in out and b"\r" not in err
    text = err.decode()
    epochs = re.findall(r"^epoch (\d+)/3 step \d+: .*train_loss .*val_f1 ", text, re.M)
    assert epochs == ["1", "2", "3"]
    # inside an epoch (3 batches), a line each time another 10% of its batches is done: after 1/3 and 2/3
    tenths = re.findall(r"^epoch (\d+)/3 (\d+)% \(batch (\d)/3\) step (\d+): train_loss ", text, re.M)
    assert tenths == [
        (str(e), p, b, str(3 * (e - 1) + int(b))) for e in (1, 2, 3) for p, b in (("30", "1"), ("60", "2"))
    ]
    fill = re.findall(r"^biLM: ", text, re.M)  # the layer cache fill, at most once per 10%
    assert 1 <= len(fill) <= 10
    # Lightning's warnings that are intended here (the frozen biLM in eval mode) stay out of the log
    assert "in eval mode" not in text and "LeafSpec" not in text and "litlogger" not in text, text
    assert "multiple `ModelCheckpoint`" not in text, text  # the best checkpoint is named, not asked for
    # ... and so does the "Checkpoint directory ... exists and is not empty" of every --resume
    assert_console(out.decode(), text, tmp_path / "run")
    out, err = run_cli(
        tmp_path,
        "train",
        "--config",
        str(ROOT / "configs" / "tiny.yaml"),
        f"output_dir={tmp_path / 'run'}",
        f"elmo.cache_dir={tmp_path / 'cache'}",
        "trainer.max_epochs=4",
        "trainer.enable_progress_bar=true",
        "trainer.threads=1",
        "--resume",
    )
    assert re.findall(r"^epoch (\d+)/4 step ", err.decode(), re.M) == ["4"]
    assert "is not empty" not in err.decode(), err.decode()
    assert_console(out.decode(), err.decode(), tmp_path / "run")


def assert_console(out: str, err: str, run: Path) -> None:
    """What ``train`` prints: one table per evaluated split in percent (the report files keep seqeval's), each
    Lightning line once, no device summary without a GPU, and the report named last."""
    assert out.count("Dev set (5 sentences), entity scores in percent") == 1
    assert out.count("Test set (5 sentences), entity scores in percent") == 1
    # seqeval's own table (fractions) is in report_*.txt only
    assert "precision    recall  f1-score" not in out
    metrics = json.loads((run / "metrics.json").read_text())
    for split in ("dev", "test"):  # all types together: the numbers of metrics.json, in percent
        m = metrics[split]
        row = rf"^all +{m['precision']:.2f} +{m['recall']:.2f} +{m['f1']:.2f} +13$"
        assert re.search(row, out, re.M), out
    assert out.splitlines()[-1] == f"report: {run / 'report.html'}" and (run / "report.html").is_file()
    assert f"dev F1 {metrics['dev']['f1']:.2f}  test F1 {metrics['test']['f1']:.2f}" in out.splitlines()[-2]
    logged = [line for line in err.splitlines() if line.startswith(("Restoring", "Loaded", "Restored"))]
    assert len(logged) == len(set(logged)), logged  # the best checkpoint is loaded once, for dev and test
    assert f"Restoring states from the checkpoint path at {run / 'checkpoints' / 'best.ckpt'}" in logged
    if not torch.cuda.is_available():  # Lightning's "GPU available: False" and "TPU available: False" lines
        assert "available: False" not in err, err


@pytest.mark.system
@pytest.mark.slow
def test_pretraining_log_has_one_line_per_tenth_of_the_steps(tmp_path: Path) -> None:
    words = "the cat sees a dog . a big fish eats the small cat .".split()
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(" ".join(words[i:] + words[:i]) + "\n" for i in range(len(words))) * 20)
    out, err = run_cli(
        tmp_path,
        "pretrain-bilm",
        "--config",
        str(ROOT / "configs" / "bilm_tiny.yaml"),
        f"output_dir={tmp_path / 'run'}",
        f"data.train={corpus}",
        f"data.heldout=[{corpus}]",
        "data.max_train_tokens=null",
        "data.vocab_size=20",
        "train.max_steps=20",
        "train.batch_size=4",
        "train.n_negative_samples=4",
        "train.enable_progress_bar=true",
        "--threads",
        "1",
    )
    assert b"\r" not in out and b"\r" not in err
    steps = re.findall(r"^step (\d+)/20 \((\d+)%\): .*train_loss ", err.decode(), re.M)
    assert steps == [(str(2 * k), str(10 * k)) for k in range(1, 11)]
    assert "weights_only" not in err.decode() and "LeafSpec" not in err.decode(), err.decode()


def test_device_summary_is_dropped_only_where_no_gpu_exists() -> None:
    import logging

    from ner_app.runtime.log_progress import NoProductTips

    def kept(message: str) -> bool:
        return NoProductTips().filter(logging.LogRecord("x", logging.INFO, "", 0, message, None, None))

    assert kept("GPU available: True (cuda), used: True") and kept(
        "Restoring states from the checkpoint path at x"
    )
    assert not kept("💡 Tip: For seamless cloud logging, install litlogger")
    for line in ("GPU available: False, used: False", "TPU available: False, using: 0 TPU cores"):
        assert kept(line) == torch.cuda.is_available()  # said on a GPU machine, noise on a CPU one
