"""A tiny model trained once a session, without ELMo, and the config that continues it."""

from __future__ import annotations

from pathlib import Path

import pytest

import train
from tests.helpers import REPO, train_args


@pytest.fixture(scope="session")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The export of a tiny run (words and chars, no ELMo) that tags the tiny CoNLL sample."""
    run = tmp_path_factory.mktemp("label_studio") / "run"
    assert train.main(train_args(run, "elmo.enabled=false", "trainer.max_epochs=30")) == 0
    return run / "export"


@pytest.fixture(scope="session")
def continue_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A training config with the tiny model's architecture (what --config names for the backend)."""
    path = tmp_path_factory.mktemp("label_studio_config") / "continue.yaml"
    path.write_text(
        f"base: {REPO / 'configs' / 'tiny.yaml'}\n"
        "elmo:\n  enabled: false\n"
        "trainer:\n  patience: 3\n  enable_progress_bar: false\n"
    )
    return path


@pytest.fixture(scope="session")
def weak_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same tiny model after 2 epochs: what annotations improve."""
    run = tmp_path_factory.mktemp("label_studio_weak") / "run"
    assert train.main(train_args(run, "elmo.enabled=false", "trainer.max_epochs=2")) == 0
    return run / "export"
