"""Partial annotation end to end: ``-`` tags reach the batch as ``known``, the loss is the partial likelihood,
a tiny run with hidden tags still learns the tiny set, and files without ``-`` train bit-identically."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import train
from ner_app.tagger.batch import encode_batch
from ner_app.text.conll import read_conll
from ner_app.text.tags import convert, scheme_tags
from ner_app.text.vocab import build_char_vocab, build_tag_vocab, build_word_vocab
from ner_app.train.datamodule import Collator
from tests.helpers import vocab_spec

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "data" / "tiny_conll"


def run(tmp_path: Path, data: Path, bilm, *overrides: str) -> int:
    args = [
        "--config",
        str(ROOT / "configs" / "tiny.yaml"),
        f"output_dir={tmp_path / 'run'}",
        f"data.dir={data}",
        f"elmo.cache_dir={tmp_path / 'cache'}",
        f"elmo.options={bilm[0]}",
        f"elmo.weights={bilm[1]}",
    ]
    return train.main(args + list(overrides))


def bioes_copy(target: Path, hidden: set[int]) -> None:
    """The tiny corpus (IOB1) rewritten in BIOES, the training scheme, in ``target``, with the tags of the
    training tokens numbered ``hidden`` (1-based, in file order) replaced by ``-``. In the training scheme no
    known tag has to be converted beside an unknown one (docs/data.md)."""
    target.mkdir()
    for name in ("train.txt", "valid.txt", "test.txt"):
        lines, number = (TINY / name).read_text().split("\n"), 0
        for sentence in read_conll(TINY / name):
            for i, tag in enumerate(convert(sentence.tags, "IOB1", "BIOES")):
                number += 1
                row = sentence.line - 1 + i  # a sentence's tokens are on consecutive lines
                if name == "train.txt" and number in hidden:
                    tag = "-"
                lines[row] = " ".join([*lines[row].split(" ")[:-1], tag])
        (target / name).write_text("\n".join(lines))


def test_encode_batch_marks_unknown_tags():
    sentences = [["EU", "rejects", "it"], ["Peter"]]
    tags = [["B-ORG", "-", "O"], ["-"]]
    tag_vocab = build_tag_vocab(tags, "BIO")
    spec = vocab_spec(build_word_vocab(sentences), build_char_vocab(sentences), tag_vocab.itos)
    batch = encode_batch(sentences, spec, tags)
    assert batch["known"].dtype == torch.bool
    assert batch["known"].tolist() == [[True, False, True], [False, False, False]]  # padding is not known
    assert batch["tags"].tolist() == [[tag_vocab.stoi["B-ORG"], 0, 0], [0, 0, 0]]


@pytest.mark.system
def test_hidden_tags_still_learn_the_tiny_set(tmp_path, tiny_bilm_files):
    data = tmp_path / "data"
    # 9 of the 34 training tags, each one the model can still learn: a word annotated elsewhere ("Acme Corp",
    # "Paris", "Berlin", ".") or a tag its known neighbours fix (Alice before E-PER, Jones between B-PER and O)
    bioes_copy(data, {1, 6, 11, 19, 20, 21, 26, 29, 31})
    train_tags = [s.tags for s in read_conll(data / "train.txt")]
    assert sum(t.count("-") for t in train_tags) == 9
    assert [t for t in train_tags[0]] == ["-", "E-PER", "O", "O", "S-LOC", "-"]  # Alice Smith flew to Paris .
    assert run(tmp_path, data, tiny_bilm_files) == 0
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["dev"]["f1"] == 100.0 and metrics["test"]["f1"] == 100.0
    spec = json.loads((tmp_path / "run" / "export" / "tagger.json").read_text())
    # "not annotated" is no tag of the model
    assert spec["vocab"]["tags"]["tokens"] == scheme_tags("BIOES", ["LOC", "MISC", "ORG", "PER"])


@pytest.mark.system
def test_no_unknown_tags_train_bit_identically(tmp_path, tiny_bilm_files, monkeypatch):
    """Batches that carry ``known`` (all True) train exactly as batches without it (the loss before partial
    annotation existed): same weights to the bit, same scores."""
    overrides = ("trainer.max_epochs=4", "model.dropout=0.3")
    assert run(tmp_path / "with", TINY, tiny_bilm_files, *overrides) == 0
    collate = Collator.__call__

    def without_known(self, items):
        batch = collate(self, items)
        known = batch.pop("known")
        assert bool(known[batch["mask"]].all())  # the tiny corpus has every tag annotated
        return batch

    monkeypatch.setattr(Collator, "__call__", without_known)
    assert run(tmp_path / "without", TINY, tiny_bilm_files, *overrides) == 0
    a = load_file(tmp_path / "with/run/export/model.safetensors")
    b = load_file(tmp_path / "without/run/export/model.safetensors")
    assert a.keys() == b.keys()
    for name, tensor in a.items():
        assert torch.equal(tensor, b[name]), name
    scores = [json.loads((tmp_path / f"{x}/run/metrics.json").read_text()) for x in ("with", "without")]
    for m in scores:
        for split in ("dev", "test"):
            m[split].pop("sentences_per_s")
    assert scores[0]["dev"] == scores[1]["dev"] and scores[0]["test"] == scores[1]["test"]


@pytest.mark.parametrize("name", ["valid.txt", "test.txt"])
def test_scored_splits_refuse_unknown_tags(tmp_path, tiny_bilm_files, capsys, name):
    data = tmp_path / "data"
    shutil.copytree(TINY, data)
    text = (data / name).read_text().split("\n")
    row = next(i for i, line in enumerate(text) if line.endswith("I-PER"))
    text[row] = text[row][: -len("I-PER")] + "-"
    (data / name).write_text("\n".join(text))
    assert run(tmp_path, data, tiny_bilm_files) == 2
    err = capsys.readouterr().err
    assert f"{data / name}:{row + 1}: expected an annotated tag, found '-' (not annotated)" in err
    assert not (tmp_path / "run" / "metrics.json").exists()
