"""``trainer.logger`` / ``train.logger``: TensorBoard event files beside the CSV log the run report reads, and
one line (exit 2) when the tensorboard package is missing."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import train
from ner_app.cli.commands import main
from tests.helpers import one_error_line, tiny_overrides, train_args, write_grammar

ROOT = Path(__file__).resolve().parents[2]


def scalar_tags(folder: Path) -> set[str]:
    """The scalar names in the TensorBoard event files of ``folder``, read by TensorBoard's own reader."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(folder))
    events.Reload()
    return set(events.Tags()["scalars"])


@pytest.mark.system
def test_tensorboard_logs_beside_the_csv_log(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    run = tmp_path / "run"
    assert train.main(train_args(run, "trainer.logger=tensorboard", "optim.schedule=linear")) == 0
    assert list((run / "logs" / "tensorboard").glob("events.out.tfevents.*"))
    assert {"train_loss", "val_f1", "lr"} <= scalar_tags(run / "logs" / "tensorboard")
    header = (run / "logs" / "metrics.csv").read_text().splitlines()[0]
    assert "val_f1" in header and "train_loss" in header  # the CSV log is written as without TensorBoard
    assert (run / "report.html").is_file()  # ... and the run report is drawn from it


def test_pretraining_logs_to_tensorboard_too(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    corpus = write_grammar(tmp_path / "train.txt", 60, seed=0)
    overrides = [*tiny_overrides(tmp_path, corpus, [corpus], steps=6), "train.logger=tensorboard"]
    assert (
        main(
            [
                "pretrain-bilm",
                "--config",
                str(ROOT / "configs" / "bilm_tiny.yaml"),
                "--threads",
                "1",
                *overrides,
                "train.val_every_n_steps=3",
            ]
        )
        == 0
    )
    assert "val_ppl" in scalar_tags(tmp_path / "run" / "logs" / "tensorboard")
    assert (tmp_path / "run" / "logs" / "metrics.csv").is_file()


@pytest.mark.parametrize("command", ["train", "pretrain-bilm"])
def test_missing_tensorboard_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    # None in sys.modules makes every import of the package fail, as on a machine without it
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)
    run = tmp_path / "run"
    if command == "train":
        code = train.main(train_args(run, "trainer.logger=tensorboard"))
        key = "trainer.logger"
    else:
        corpus = write_grammar(tmp_path / "train.txt", 20, seed=0)
        overrides = [*tiny_overrides(tmp_path, corpus, [corpus], steps=2), "train.logger=tensorboard"]
        code = main(["pretrain-bilm", "--config", str(ROOT / "configs" / "bilm_tiny.yaml"), *overrides])
        key = "train.logger"
    assert code == 2
    one_error_line(
        capsys, f"{key}=tensorboard: the tensorboard package is not installed (pip install tensorboard)"
    )
    if command == "train":
        assert not run.exists()  # refused before the run folder is made
