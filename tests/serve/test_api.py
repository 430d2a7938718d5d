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
from ner_app.predict import api
from ner_app.text.conll import read_conll
from tests.helpers import random_bilm

pytestmark = pytest.mark.system  # trains a tiny run: out of the fast lane

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
    assert [[e.to_json() for e in entities] for entities in found] == [p["entities"] for p in printed]
    assert found[0] and all(
        text[e.start : e.end] == e.text for text, es in zip(TEXTS, found, strict=True) for e in es
    )
    assert tagger.predict_text(TEXTS[2]) == found[2]
    assert {e.type for es in found for e in es} <= set(tagger.entity_types) == {"LOC", "MISC", "ORG", "PER"}


def predicted(export: Path, tmp_path: Path, capsys, *flags: str, fmt: str = "jsonl") -> list:
    """What ``predict`` prints for ``TEXTS`` (and the tiny test sentences) with ``flags``."""
    source = tmp_path / "in.txt"
    source.write_text("\n".join(TEXTS + SENTENCES) + "\n", encoding="utf-8")
    command = ["predict", "--model", str(export), "--input", str(source), "--threads", "1", "--format", fmt]
    assert main([*command, *flags]) == 0
    out = capsys.readouterr().out
    return [out] if fmt == "html" else [json.loads(line) for line in out.splitlines()]


SENTENCES = [" ".join(s.tokens) for s in read_conll(TINY / "test.txt")]


def test_scores_are_probabilities_and_min_score_drops_below(export: Path, tmp_path: Path, capsys) -> None:
    plain = predicted(export, tmp_path, capsys)
    scores = sorted(e["score"] for p in plain for e in p["entities"])
    assert scores and all(0.0 <= s <= 1.0 for s in scores)
    threshold = scores[len(scores) // 2]
    kept = predicted(export, tmp_path, capsys, "--min-score", str(threshold))
    assert [p["entities"] for p in kept] == [
        [e for e in p["entities"] if e["score"] >= threshold] for p in plain
    ]
    assert sum(map(len, (p["entities"] for p in kept))) < len(scores)
    assert predicted(export, tmp_path, capsys, "--min-score", "0") == plain


def test_alternatives_overlap_their_entity_and_are_ranked(export: Path, tmp_path: Path, capsys) -> None:
    plain = predicted(export, tmp_path, capsys)
    found = predicted(export, tmp_path, capsys, "--alternatives", "3")
    assert [[{k: v for k, v in e.items() if k != "alternatives"} for e in p["entities"]] for p in found] == [
        p["entities"] for p in plain
    ]
    seen = 0
    for line in found:
        for entity in line["entities"]:
            alternatives = entity["alternatives"]
            assert len(alternatives) <= 3
            seen += len(alternatives)
            assert [a["score"] for a in alternatives] == sorted(
                (a["score"] for a in alternatives), reverse=True
            )
            for a in alternatives:
                assert line["text"][a["start"] : a["end"]] == a["text"]
                assert a["start"] < entity["end"] and a["end"] > entity["start"]  # they overlap
                assert (a["start"], a["end"], a["type"]) != (entity["start"], entity["end"], entity["type"])
                # overlapping readings never share a path: their probabilities add up to at most 1
                assert 0.0 <= a["score"] and entity["score"] + a["score"] <= 1.0 + 1e-4
    assert seen


def test_flag_missed_flags_o_tokens_with_their_best_reading(export: Path, tmp_path: Path, capsys) -> None:
    plain = predicted(export, tmp_path, capsys)
    found = predicted(export, tmp_path, capsys, "--flag-missed", "1")
    assert [p["entities"] for p in found] == [p["entities"] for p in plain]
    assert all("flagged" not in p for p in plain)
    flagged = [(line, f) for line in found for f in line["flagged"]]
    assert flagged
    for line, f in flagged:
        assert line["text"][f["start"] : f["end"]] == f["text"] and 0.0 <= f["o_score"] < 1.0
        assert not any(e["start"] < f["end"] and e["end"] > f["start"] for e in line["entities"])  # tagged O
        reading = f["reading"]
        assert reading["start"] <= f["start"] and f["end"] <= reading["end"]  # it covers the token
        assert line["text"][reading["start"] : reading["end"]] == reading["text"]
        assert 0.0 < reading["score"] <= 1.0 - f["o_score"] + 1e-4  # a reading covering it makes it not O
    few = predicted(export, tmp_path, capsys, "--flag-missed", "0.5")
    assert {(p["text"], f["start"]) for p in few for f in p["flagged"]} == {
        (line["text"], f["start"]) for line, f in flagged if f["o_score"] < 0.5
    }


def test_html_marks_alternatives_and_flagged_tokens(export: Path, tmp_path: Path, capsys) -> None:
    plain = predicted(export, tmp_path, capsys, fmt="html")[0]
    assert 'class="flag"' not in plain and 'class="alts"' not in plain
    page = predicted(export, tmp_path, capsys, "--alternatives", "2", "--flag-missed", "1", fmt="html")[0]
    assert page.count('<sup class="alts">') == plain.count("<mark data-type") - 4  # the legend's 4 marks
    assert page.count('<span class="flag" title="O ') > 0


def test_the_api_takes_the_same_options(export: Path, tmp_path: Path, capsys) -> None:
    tagger = ner_app.load_tagger(export)
    want = predicted(
        export, tmp_path, capsys, "--min-score", "0.3", "--alternatives", "2", "--flag-missed", "0.9"
    )
    lines = tagger.predict_lines(TEXTS + SENTENCES, min_score=0.3, alternatives=2, flag_missed=0.9)
    assert [line.to_json() for line in lines] == want
    found = tagger.predict(TEXTS + SENTENCES, min_score=0.3, alternatives=2)
    assert [[e.to_json() for e in es] for es in found] == [p["entities"] for p in want]
    assert tagger.predict_text(TEXTS[0], 0.3, 2) == found[0]
    for bad, error in (
        ({"min_score": 1.5}, ValueError),
        ({"min_score": "0.5"}, TypeError),
        ({"alternatives": -1}, ValueError),
        ({"alternatives": 2.0}, TypeError),
        ({"flag_missed": float("nan")}, ValueError),
        ({"flag_missed": True}, TypeError),
    ):
        with pytest.raises(error, match=next(iter(bad))):
            tagger.predict_lines(TEXTS, **bad)


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
