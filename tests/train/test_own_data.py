"""From an annotation export to a tagger (docs/own_data.md): the README's three commands run as written, in a
folder laid out as a user's (configs/own_data.yaml copied beside a doccano export), at tiny scale; and text
outside the spans of a span format read as not annotated (``data.outside: unknown``), in convert and training."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ner_app.cli.commands import main
from ner_app.text.annotations.convert import Options
from ner_app.text.annotations.model import AnnotationFormatError
from ner_app.text.annotations.resolve import Policy
from ner_app.text.conll import read_conll
from ner_app.text.tags import UNKNOWN
from ner_app.train.corpus import load_corpus, reading_options
from tests.helpers import TINY, TINY_BILM
from tests.train.test_annotation_data import write_doccano

pytestmark = pytest.mark.system  # trains tiny runs and runs the documented commands: out of the fast lane

ROOT = Path(__file__).resolve().parents[2]
# The README's "train on your own annotations" (and docs/own_data.md's); training gets tiny-scale overrides.
COMMANDS = [
    "python -m ner_app check-data mine/",
    "python -m ner_app check-data --config configs/own_data.yaml",
    "python -m ner_app train --config configs/own_data.yaml data.dir=mine",
    "python -m ner_app predict --model runs/own_data/export --input news.txt --format labelstudio --output pre.json",
]
TINY_SCALE = [
    "model.glove=null",
    "model.word_dim=8",
    "model.char_dim=4",
    "model.char_filters=8",
    "model.lstm_hidden=16",
    "model.lstm_layers=1",
    "model.dropout=0.0",
    "optim.lr=0.01",
    "data.batch_size=2",
    "trainer.max_epochs=40",
    "trainer.patience=40",
    "trainer.threads=1",
    "trainer.enable_progress_bar=false",
    f"elmo.options={TINY_BILM / 'options.json'}",
    f"elmo.weights={TINY_BILM / 'weights.hdf5'}",
]


@pytest.mark.slow
def test_documented_commands(tmp_path):
    """A user's folder: the template config beside a doccano export of train, dev and test; check-data, train
    and predict as the README writes them; the tagger learns the tiny corpus (F1 100) and its pre-annotations
    are a Label Studio import."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "configs").mkdir()
    shutil.copy(ROOT / "configs/own_data.yaml", tmp_path / "configs/own_data.yaml")
    write_doccano(tmp_path / "mine")
    (tmp_path / "news.txt").write_text("Acme Corp hired Bob Jones in Berlin.\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for command in COMMANDS:
        argv = [sys.executable, *shlex.split(command)[1:]]
        if " train " in command:
            argv += TINY_SCALE
        done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, (command, done.stdout[-2000:], done.stderr[-2000:])
    metrics = json.loads((tmp_path / "runs/own_data/metrics.json").read_text())
    assert metrics["dev"]["f1"] == 100.0 and metrics["test"]["f1"] == 100.0
    (task,) = json.loads((tmp_path / "pre.json").read_text(encoding="utf-8"))
    labels = {r["value"]["text"]: r["value"]["labels"] for r in task["predictions"][0]["result"]}
    assert labels == {"Acme Corp": ["ORG"], "Bob Jones": ["PER"], "Berlin": ["LOC"]}  # a train sentence


def test_the_template_config_runs_as_shipped_at_tiny_scale(tmp_path, monkeypatch):
    """configs/own_data.yaml with the shipped biLM it names (the test runs from the checkout, as users do)."""
    folder = write_doccano(tmp_path / "mine")
    monkeypatch.chdir(ROOT)
    argv = [
        "--config",
        str(ROOT / "configs/own_data.yaml"),
        f"data.dir={folder}",
        f"output_dir={tmp_path / 'run'}",
    ]
    overrides = ["model.glove=null", "model.lstm_hidden=8", "trainer.max_epochs=1", "elmo.cache_dir=null"]
    assert main(["train", *argv, *overrides, "trainer.enable_progress_bar=false", "trainer.threads=1"]) == 0
    assert (tmp_path / "run" / "metrics.json").is_file()


# ---------------------------------------------------------------------------- outside the spans: unknown
def spans_folder(tmp_path: Path) -> Path:
    """A doccano export where only some names are marked: 'Bob' in the second line is not."""
    folder = tmp_path / "partial"
    folder.mkdir()
    train = [
        {"text": "Alice met Sony in Paris.", "label": [[0, 5, "PER"], [10, 14, "ORG"]]},
        {"text": "Bob saw Carol Smith.", "label": [[8, 19, "PER"]]},
    ]
    dev = [{"text": "Alice met Sony.", "label": [[0, 5, "PER"], [10, 14, "ORG"]]}]
    for name, lines in (("train", train), ("valid", dev), ("test", dev)):
        (folder / f"{name}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return folder


def test_convert_outside_unknown_marks_only_the_spans(tmp_path):
    folder = spans_folder(tmp_path)
    out = tmp_path / "partial.conll"
    assert main(["convert", str(folder / "train.jsonl"), "--outside", "unknown", "--output", str(out)]) == 0
    assert [(s.tokens, s.tags) for s in read_conll(out)] == [
        (["Alice", "met", "Sony", "in", "Paris", "."], ["B-PER", "-", "B-ORG", "-", "-", "-"]),
        (["Bob", "saw", "Carol", "Smith", "."], ["-", "-", "B-PER", "I-PER", "-"]),
    ]


def test_training_reads_train_outside_unknown_and_dev_in_full(tmp_path):
    folder = spans_folder(tmp_path)
    options = reading_options(outside="unknown")
    for scheme, want in (
        ("BIOES", ["-", "-", "B-PER", "E-PER", "-"]),
        ("BIO", ["-", "-", "B-PER", "I-PER", "-"]),
    ):
        corpus = load_corpus(str(folder), None, scheme, options=options)
        # the entity's edges stay known in either training scheme: the splits are read in BIOES
        assert corpus.splits["train"].tags[1] == want
        assert corpus.splits["train"].tags[0][0] == ("S-PER" if scheme == "BIOES" else "B-PER")
        assert UNKNOWN not in {t for tags in corpus.splits["dev"].tags for t in tags}
    plain = load_corpus(str(folder), None, "BIOES", options=Options(Policy({}, None)))
    assert plain.splits["train"].tags[1] == ["O", "O", "B-PER", "E-PER", "O"]


def test_a_run_trains_on_data_outside_unknown(tmp_path):
    import train
    from tests.helpers import train_args

    folder = spans_folder(tmp_path)
    run = tmp_path / "run"
    assert train.main(train_args(run, f"data.dir={folder}", "data.outside=unknown")) == 0
    saved = (run / "config.yaml").read_text()
    assert "outside: unknown" in saved and (run / "metrics.json").is_file()


def test_documented_convert_outside_unknown(tmp_path):
    """docs/partial_annotation.md's command, run as written beside a doccano export."""
    folder = spans_folder(tmp_path)
    shutil.copy(folder / "train.jsonl", tmp_path / "export.jsonl")
    command = (
        "python -m ner_app convert export.jsonl --from doccano --outside unknown --output mine/train.txt"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, *shlex.split(command)[1:]]
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    tags = [s.tags for s in read_conll(tmp_path / "mine/train.txt")]
    assert tags == [["B-PER", "-", "B-ORG", "-", "-", "-"], ["-", "-", "B-PER", "I-PER", "-"]]


def test_outside_unknown_refuses_token_formats(tmp_path, capsys):
    out = tmp_path / "x.conll"
    assert main(["convert", str(TINY / "train.txt"), "--outside", "unknown", "--output", str(out)]) == 2
    assert "outside unknown is for span formats" in capsys.readouterr().err and not out.exists()
    with pytest.raises(AnnotationFormatError, match=r"train.txt: outside unknown is for span formats"):
        load_corpus(str(TINY), None, "BIOES", options=reading_options(outside="unknown"))


# ---------------------------------------------------------------------------- the loop from one export
LOOP = [
    "python -m ner_app split export.json --output mine",
    "python -m ner_app check-data mine/",
    "python -m ner_app train --config configs/own_data_continue.yaml --init-from data/models/conll2003 data.dir=mine "
    "data.previous_dev=mine/test.txt",
    "python -m ner_app predict --model runs/own_data_continue/export --input news.txt --format labelstudio "
    "--output pre.json",
]


@pytest.mark.slow
def test_documented_loop(tmp_path):
    """docs/own_data.md's loop as written, in a user's folder holding a copy of the repository's configs and the
    shipped tagger: one Label Studio export split, checked, the shipped tagger continued on it for two epochs
    with the old types scored on the user's own test split, and pre-annotations written by the new model."""
    from tests.serve.label_studio.tasks import conll_tasks

    tasks = [
        *conll_tasks(TINY / "train.txt"),
        *conll_tasks(TINY / "valid.txt", 100),
        *conll_tasks(TINY / "test.txt", 200),
    ]
    (tmp_path / "export.json").write_text(json.dumps(tasks), encoding="utf-8")
    (tmp_path / "news.txt").write_text("Acme Corp hired Bob Jones in Berlin.\n", encoding="utf-8")
    shutil.copytree(ROOT / "configs", tmp_path / "configs")
    shutil.copytree(ROOT / "data" / "models" / "conll2003", tmp_path / "data" / "models" / "conll2003")
    (tmp_path / "pyproject.toml").write_text("")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for command in LOOP:
        argv = [sys.executable, *shlex.split(command)[1:]]
        if " train " in command:
            argv += ["trainer.max_epochs=2", "trainer.threads=1", "trainer.enable_progress_bar=false"]
        done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, (command, done.stdout[-2000:], done.stderr[-2000:])
    metrics = json.loads((tmp_path / "runs/own_data_continue/metrics.json").read_text())
    assert metrics["previous_dev"]["types"] == ["LOC", "MISC", "ORG", "PER"]
    spec = json.loads((tmp_path / "runs/own_data_continue/export/tagger.json").read_text())
    assert {t.split("-", 1)[-1] for t in spec["vocab"]["tags"]["tokens"] if t != "O"} == {
        "LOC",
        "MISC",
        "ORG",
        "PER",
    }
    (task,) = json.loads((tmp_path / "pre.json").read_text(encoding="utf-8"))
    assert task["predictions"][0]["model_version"].startswith("own_data_continue-")
    labels = {r["value"]["text"]: r["value"]["labels"] for r in task["predictions"][0]["result"]}
    assert labels == {"Acme Corp": ["ORG"], "Bob Jones": ["PER"], "Berlin": ["LOC"]}
