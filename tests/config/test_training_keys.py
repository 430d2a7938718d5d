"""The training workflow's keys: learning-rate schedule, gradient accumulation, logger. Their defaults are
today's behaviour; a value no run can use is one line naming the key, exit code 2."""

from __future__ import annotations

from pathlib import Path

import pytest

import train
from ner_app.config.checks import check_train_config
from ner_app.config.load import ConfigError, TrainConfig, config_from_dict
from ner_app.config.schema import BilmPretrainConfig
from ner_app.errors import NerAppError
from tests.helpers import one_error_line

ROOT = Path(__file__).resolve().parents[2]


def test_defaults_keep_a_constant_lr_one_batch_per_step_and_the_csv_log() -> None:
    cfg = TrainConfig()
    assert cfg.optim.schedule == "none" and cfg.trainer.accumulate_grad_batches == 1
    assert cfg.trainer.logger == "csv" and BilmPretrainConfig().train.logger == "csv"
    cfg = config_from_dict(
        {"optim": {"schedule": "linear", "warmup_fraction": 0}, "trainer": {"logger": "tensorboard"}}
    )
    assert (cfg.optim.schedule, cfg.optim.warmup_fraction, cfg.trainer.logger) == (
        "linear",
        0.0,
        "tensorboard",
    )
    check_train_config(cfg)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("optim.schedule=cosine", "expected one of 'none', 'linear', 'plateau', found str 'cosine'"),
        ("trainer.logger=wandb", "expected one of 'csv', 'tensorboard', found str 'wandb'"),
        ("optim.warmup_fraction=1", "'optim.warmup_fraction' must be a finite number in [0.0, 0.99]"),
        ("optim.warmup_fraction=-0.1", "'optim.warmup_fraction' must be a finite number in [0.0, 0.99]"),
        ("optim.plateau_factor=0", "'optim.plateau_factor' must be a finite number in (0.0, 0.99]"),
        ("optim.plateau_factor=1.0", "'optim.plateau_factor' must be a finite number in (0.0, 0.99]"),
        ("optim.plateau_patience=-1", "'optim.plateau_patience' is -1, expected an integer in [0, "),
        (
            "trainer.accumulate_grad_batches=0",
            "'trainer.accumulate_grad_batches' is 0, expected an integer in [1, ",
        ),
    ],
)
def test_unusable_values_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], override: str, message: str
) -> None:
    args = ["--config", str(ROOT / "configs" / "tiny.yaml"), f"output_dir={tmp_path / 'run'}", override]
    assert train.main(args) == 2
    one_error_line(capsys, message)
    assert not (tmp_path / "run").exists()  # refused before the run folder is made


def test_checks_name_the_key() -> None:
    cfg = TrainConfig()
    cfg.optim.warmup_fraction = float("nan")
    with pytest.raises(NerAppError, match="optim.warmup_fraction"):
        check_train_config(cfg)
    with pytest.raises(ConfigError, match="optim.schedule"):
        config_from_dict({"optim": {"schedule": None}})
