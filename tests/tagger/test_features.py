"""The input features as a slot: old ``tagger.json`` formats and weight keys load with the same outputs, the
feature list round-trips, an unknown name is one line, and a feature defined here (a capitalisation pattern)
needs only its module and a registry row to train, export and predict."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file
from torch import nn

import train
from ner_app.cli.commands import main
from ner_app.predict.predictor import Predictor
from ner_app.tagger.batch import encode_batch
from ner_app.tagger.export import export_model, load_export, read_spec
from ner_app.tagger.features import (
    FEATURES,
    FeatureInputs,
    FeatureOutput,
    FeatureSpec,
    InputFeature,
    register_feature,
)
from ner_app.tagger.features.elmo import ElmoRef
from ner_app.tagger.spec import SPEC_FORMAT, SpecError, TaggerSizes, TaggerSpec
from ner_app.text.conll import read_conll
from tests.helpers import one_error_line, rewrite_spec, train_args

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "data" / "models" / "conll2003"  # format ner_app.tagger/2
EXPORT_V1 = ROOT / "tests" / "data" / "export_v1"  # format ner_app.tagger/1, with ELMo
SENTENCES = [
    ["EU", "rejects", "German", "call", "to", "boycott", "British", "lamb", "."],
    ["Peter", "Blackburn"],
]


def _emissions(export: Path) -> tuple[torch.Tensor, torch.Tensor]:
    tagger, spec = load_export(export)
    with torch.inference_mode():
        batch = encode_batch(SENTENCES, spec)
        return tagger.emissions(batch), tagger.decode_scored(batch)[1]


@pytest.mark.system  # loads the shipped tagger twice
@pytest.mark.parametrize("export", [SHIPPED, EXPORT_V1], ids=["format-2", "format-1"])
def test_an_old_export_loads_with_its_keys_and_predicts_as_its_rewrite_in_format_3(
    export: Path, tmp_path
) -> None:
    """A /1 or /2 export reads as words, chars (and ELMo); written again it is /3, with the same tensors under
    the same keys, and gives the same emissions and scores to the bit. (The /1 export predates integrity
    records: a copy gets them, which changes none of its other keys.)"""
    if export == EXPORT_V1:
        export = Path(shutil.copytree(EXPORT_V1, tmp_path / "v1"))
        rewrite_spec(export, lambda data: None, recompute=True)
    spec, data = read_spec(export / "tagger.json")
    assert data["format"] != SPEC_FORMAT
    names = [f.name for f in spec.features]
    assert names == (["words", "chars", "elmo"] if data.get("elmo") else ["words", "chars"])
    tagger, spec = load_export(export)
    old_keys = set(load_file(str(export / "model.safetensors")))
    assert old_keys <= set(tagger.state_dict())  # word_embed.weight, char_cnn.*, elmo.scalar_mixes.*, ...
    assert {"word_embed.weight", "char_cnn.conv.weight", "crf.transitions"} <= old_keys
    again = export_model(tagger, spec, tmp_path / "again")
    rewritten = json.loads((again / "tagger.json").read_text(encoding="utf-8"))
    assert rewritten["format"] == SPEC_FORMAT and "elmo" not in rewritten
    assert [f["name"] for f in rewritten["features"]] == names
    new_state = load_file(str(again / "model.safetensors"))
    old_state = load_file(str(export / "model.safetensors"))
    assert set(new_state) == set(old_state)
    assert all(torch.equal(new_state[k], old_state[k]) for k in old_state)
    (a, p), (b, q) = _emissions(export), _emissions(again)
    assert torch.equal(a, b) and torch.equal(p, q)


def test_old_weight_keys_load_into_the_feature_modules() -> None:
    """A state dict with the keys of weight files written before features were modules loads into them, and
    the state dict is written with those keys again."""
    tagger, _ = load_export(SHIPPED)
    state = tagger.state_dict()
    assert "word_embed.weight" in state and "features.words.word_embed.weight" not in state
    changed = {k: v + 1 if v.is_floating_point() else v for k, v in state.items()}
    tagger.load_trained_state(changed, "test")
    assert torch.equal(tagger.feature("words").word_embed.weight, changed["word_embed.weight"])
    assert torch.equal(tagger.feature("chars").char_cnn.conv.bias, changed["char_cnn.conv.bias"])
    with pytest.raises(SpecError, match=r"missing \['word_embed.weight'\]"):
        tagger.load_trained_state({k: v for k, v in changed.items() if k != "word_embed.weight"}, "test")


def test_the_feature_list_round_trips() -> None:
    sizes = TaggerSizes(8, 4, 8, 3, 16, 1, 0.0)
    elmo = ElmoRef("o.json", "w.hdf5", "ab" * 32, 0.1, True, "document", 100, at_output=True)
    spec = TaggerSpec.from_training_data(sizes, [["a", "B"]], [["O", "S-PER"]], "BIOES", "IOB2", elmo=elmo)
    assert [f.name for f in spec.features] == ["words", "chars", "elmo"] and spec.elmo == elmo
    data = json.loads(json.dumps(spec.to_json()))
    assert data["features"][2] == {"name": "elmo", **json.loads(json.dumps(elmo.to_json()))}
    assert TaggerSpec.from_json(data) == spec
    only_elmo = TaggerSpec.from_json({**data, "features": [data["features"][2]]})
    assert [f.name for f in only_elmo.features] == ["elmo"] and only_elmo.elmo == elmo


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda d: d["features"].append({"name": "bert"}),
            "key 'features[2].name': unknown input feature 'bert'; expected one of chars, elmo, transformer, words",
        ),
        (
            lambda d: d["features"].append({"name": "words"}),
            "key 'features[2].name': the input feature 'words' is ",
        ),
        (lambda d: d.update(features=[]), "key 'features': expected a non-empty list"),
        (lambda d: d.update(elmo=None), "key 'elmo': not a key of this format"),
        (lambda d: d["features"][0].update(size=3), "unknown key 'features[0].size'"),
    ],
)
def test_a_bad_feature_list_is_one_line(edit, message) -> None:
    sizes = TaggerSizes(8, 4, 8, 3, 16, 1, 0.0)
    data = TaggerSpec.from_training_data(sizes, [["a"]], [["O"]], "BIOES", "BIO").to_json()
    edit(data)
    with pytest.raises(SpecError) as err:
        TaggerSpec.from_json(data, "t.json")
    assert message in str(err.value) and "\n" not in str(err.value) and str(err.value).startswith("t.json: ")


def test_an_export_with_an_unknown_feature_is_refused_in_one_line(tmp_path, capsys) -> None:
    export = tmp_path / "export"
    shutil.copytree(SHIPPED, export)

    def edit(data: dict[str, Any]) -> None:
        data.pop("elmo")
        data.update(format=SPEC_FORMAT, features=[{"name": "caps"}])

    rewrite_spec(export, edit, recompute=True)
    (tmp_path / "in.txt").write_text("EU rejects German call .\n", encoding="utf-8")
    assert main(["predict", "--model", str(export), "--input", str(tmp_path / "in.txt")]) == 2
    line = one_error_line(capsys, "features[0].name", "unknown input feature 'caps'")
    assert "expected one of chars, elmo, transformer, words" in line


def test_an_unknown_feature_in_a_config_is_one_line(tmp_path, capsys) -> None:
    assert train.main(train_args(tmp_path / "run", "model.features=[words,bert]")) == 2
    line = one_error_line(capsys, "model.features", "unknown input feature 'bert'")
    assert "expected one of chars, elmo, transformer, words" in line
    assert not (tmp_path / "run" / "checkpoints").exists()


# ---------------------------------------------------------------- a new feature: one module, one registry row
SHAPES = ("lower", "Title", "UPPER", "other")  # id 0 is padding


def shape_ids(sentences: Sequence[Sequence[str]]) -> torch.Tensor:
    """Each token's capitalisation pattern (B, T): 1 lower, 2 Title, 3 UPPER, 4 other; 0 at padding."""

    def shape(token: str) -> int:
        if token.islower():
            return 1
        if token[:1].isupper() and token[1:].islower():
            return 2
        return 3 if token.isupper() else 4

    ids = torch.zeros(len(sentences), max(map(len, sentences)), dtype=torch.long)
    for b, sentence in enumerate(sentences):
        ids[b, : len(sentence)] = torch.tensor([shape(t) for t in sentence])
    return ids


class CapsFeature(InputFeature):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.caps_embed = nn.Embedding(len(SHAPES) + 1, dim, padding_idx=0)
        self.output_dim = dim

    def forward(self, inputs: FeatureInputs) -> FeatureOutput:
        return FeatureOutput(self.caps_embed(inputs["ids"]))  # (B, T, dim)


@dataclass(frozen=True)
class CapsRef(FeatureSpec):
    name = "caps"
    dim: int = 4

    def build(self, spec: TaggerSpec, resource: Any) -> CapsFeature:
        return CapsFeature(self.dim)

    def encode(self, sentences: Sequence[Sequence[str]], spec: TaggerSpec) -> FeatureInputs:
        return {"ids": shape_ids(sentences)}


@pytest.fixture
def caps() -> Iterator[None]:
    register_feature(CapsRef)  # the one row
    try:
        yield
    finally:
        FEATURES.pop("caps")


@pytest.mark.system  # trains
def test_a_feature_defined_here_trains_to_f1_one_exports_and_predicts(tmp_path, caps) -> None:
    run = tmp_path / "run"
    args = train_args(run, "model.features=[caps,words,chars,elmo]", "trainer.max_epochs=40")
    assert train.main(args) == 0
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["dev"]["f1"] == 100.0 and metrics["test"]["f1"] == 100.0
    data = json.loads((run / "export" / "tagger.json").read_text())
    assert [f["name"] for f in data["features"]] == ["caps", "words", "chars", "elmo"]
    assert data["features"][0] == {"name": "caps", "dim": 4}
    assert load_file(str(run / "export" / "model.safetensors"))["caps_embed.weight"].shape == (5, 4)
    tagger, spec = load_export(run / "export")
    assert tagger.feature("caps").output_dim == 4
    sentences = [s.tokens for s in read_conll(ROOT / "tests/data/tiny_conll/test.txt")]
    predicted = Predictor(tagger, spec).tag(sentences)
    gold = [s.tags for s in read_conll(ROOT / "tests/data/tiny_conll/test.txt")]
    assert [spec.to_source_scheme([t])[0] for t, _ in predicted] == gold
