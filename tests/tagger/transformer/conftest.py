"""The tiny run this folder's product tests share (the root conftest marks the tests using it ``system``)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import train
from tests.tagger.transformer.models import tiny_bert
from tests.tagger.transformer.runs import train_args


@pytest.fixture(scope="session")
def run(tmp_path_factory) -> Path:
    """A tiny run with words, chars and a tiny BERT; the BERT's folder deleted once it is trained."""
    base = tmp_path_factory.mktemp("transformer_run")
    folder = tiny_bert(base / "bert")
    assert train.main(train_args(base / "run", folder)) == 0
    shutil.rmtree(folder)  # from here on, only the export's own copy exists
    return base / "run"
