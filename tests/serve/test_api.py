"""The Python API: the same entities as ``predict``, the same arrays as ``embed``, clear errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest

import ner_app
import train
from ner_app.bilm import save_bilm
from ner_app.cli.commands import main
from ner_app.errors import MissingFileError
from ner_app.serve import api
from tests.helpers import random_bilm

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "data" / "tiny_conll"
TEXTS = ["Alice Smith flew to Paris.", "", "Acme Corp hired Bob Jones in Berlin. Then Alice left!"]


@pytest.fixture(scope="module")
def export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("api")
    options, weights = save_bilm(random_bilm(), tmp / "bilm")
    code = train.main(
        [
            "--config",
            str(ROOT / "configs/tiny.yaml"),
            f"output_dir={tmp / 'run'}",
            f"data.dir={TINY}",
            f"elmo.options={options}",
            f"elmo.weights={weights}",
        ]
    )
    assert code == 0
    return tmp / "run" / "export"


def test_load_tagger_predicts_what_the_command_prints(export: Path, tmp_path: Path, capsys) -> None:
    tagger = ner_app.load_tagger(export)
    found = tagger.predict(TEXTS)
    source = tmp_path / "in.txt"
    source.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    assert main(["predict", "--model", str(export), "--input", str(source)]) == 0
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [[e.__dict__ for e in entities] for entities in found] == [p["entities"] for p in printed]
    assert found[0] and all(
        text[e.start : e.end] == e.text for text, es in zip(TEXTS, found, strict=True) for e in es
    )
    assert tagger.predict_text(TEXTS[2]) == found[2]
    assert {e.type for es in found for e in es} <= set(tagger.entity_types) == {"LOC", "MISC", "ORG", "PER"}


def test_tag_gives_the_training_files_scheme(export: Path) -> None:
    tagger = ner_app.load_tagger(export)
    assert tagger.tag([["Alice", "Smith", "flew", "to", "Paris", "."], []]) == [
        ["I-PER", "I-PER", "O", "O", "I-LOC", "O"],
        [],
    ]


def test_a_string_is_not_a_list_of_texts(export: Path) -> None:
    with pytest.raises(TypeError, match="use predict_text for one text"):
        ner_app.load_tagger(export).predict("Alice flew")  # type: ignore[arg-type]


def test_load_bilm_embeds_what_the_command_writes(tmp_path: Path) -> None:
    folder = tmp_path / "bilm"
    save_bilm(random_bilm(), folder)
    source = tmp_path / "in.txt"
    source.write_text("Alice flew to Paris.\n\nBob's U.S. trip\n", encoding="utf-8")
    code = main(
        [
            "embed",
            "--options",
            str(folder / "options.json"),
            "--weights",
            str(folder / "weights.hdf5"),
            "--input",
            str(source),
            "--output",
            str(tmp_path / "out.hdf5"),
            "--tokenize",
        ]
    )
    assert code == 0
    found = ner_app.load_bilm(folder).embed(source.read_text(encoding="utf-8").splitlines())
    with h5py.File(tmp_path / "out.hdf5", "r") as f:
        for i, embedding in enumerate(found):
            assert np.array_equal(f[str(i)][()], embedding.layers)
            assert json.loads(f[str(i)].attrs["tokens"]) == embedding.tokens
            assert [tuple(o) for o in json.loads(f[str(i)].attrs["offsets"])] == embedding.offsets
    assert found[2].tokens == ["Bob", "'s", "U.S.", "trip"] and found[2].offsets[1] == (3, 5)
    pre = ner_app.load_bilm(folder).embed([["Alice", "flew", "to", "Paris", "."]])[0]
    assert pre.offsets is None  # alone or padded in a batch: equal up to float rounding
    np.testing.assert_allclose(pre.layers, found[0].layers, rtol=1e-5, atol=1e-6)


def test_a_downloaded_folder_is_found_by_its_file_names(tmp_path: Path) -> None:
    folder = tmp_path / "bilm"
    options, weights = save_bilm(random_bilm(), folder)
    options.rename(folder / "elmo_small_options.json")
    weights.rename(folder / "elmo_small_weights.hdf5")
    assert ner_app.load_bilm(folder).bilm.num_layers == 3
    shutil.copy(folder / "elmo_small_weights.hdf5", folder / "other.hdf5")
    with pytest.raises(MissingFileError, match=r"expected one weights.hdf5 \(or one \*.hdf5\).*found 2"):
        ner_app.load_bilm(folder)
    with pytest.raises(MissingFileError, match="not a folder"):
        ner_app.load_bilm(tmp_path / "none")


def test_a_missing_shipped_folder_is_one_clear_error(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(api, "SHIPPED_MODEL", tmp_path / "models" / "conll2003")
    with pytest.raises(MissingFileError, match="the shipped CoNLL-2003 tagger is not in this installation"):
        ner_app.load_tagger()


def test_import_ner_app_is_light() -> None:
    import subprocess
    import sys

    code = "import sys, ner_app; assert 'torch' not in sys.modules; print(sorted(ner_app.__all__))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert "load_tagger" in done.stdout
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        ner_app.nothing  # noqa: B018
