"""Training reads annotation exports directly (``data.format``, detected when unset): a doccano, CoNLL-U and
Label Studio copy of the tiny CoNLL files gives the same corpus, and a run on the doccano copy the same
weights, bit for bit, as the run on the CoNLL files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import train
from ner_app.errors import MissingFileError
from ner_app.text.conll import read_conll
from ner_app.text.tags import entities
from ner_app.train.corpus import data_files, load_corpus
from tests.helpers import TINY, train_args

SPLITS = ("train", "valid", "test")


def documents(name: str) -> list[tuple[str, list[tuple[int, int, str]], list[list[str]], list[list[str]]]]:
    """Each document of a tiny split as raw text (tokens joined by spaces), its character spans, and the
    tokens and IOB1 tags of its sentences."""
    docs: dict[int, tuple[list[list[str]], list[list[str]]]] = {}
    for s in read_conll(TINY / f"{name}.txt"):
        docs.setdefault(s.doc, ([], []))
        docs[s.doc][0].append(s.tokens)
        docs[s.doc][1].append(s.tags)
    out = []
    for tokens, tags in docs.values():
        text, spans, at = "", [], 0
        for sentence, sentence_tags in zip(tokens, tags, strict=True):
            starts = []
            for token in sentence:
                text += (" " if text else "") + token
                starts.append(len(text) - len(token))
            for kind, a, b in entities(sentence_tags, "IOB1"):
                spans.append((starts[a], starts[b - 1] + len(sentence[b - 1]), kind))
            at += len(sentence)
        out.append((text, spans, tokens, tags))
    return out


def write_doccano(folder: Path) -> Path:
    folder.mkdir()
    for name in SPLITS:
        lines = [
            json.dumps({"text": t, "label": [list(s) for s in spans]}) for t, spans, _, _ in documents(name)
        ]
        (folder / f"{name}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def write_labelstudio(folder: Path) -> Path:
    folder.mkdir()
    for name in SPLITS:
        tasks = [
            {
                "id": i,
                "data": {"text": t},
                "annotations": [
                    {
                        "result": [
                            {"type": "labels", "value": {"start": a, "end": b, "text": t[a:b], "labels": [k]}}
                            for a, b, k in spans
                        ]
                    }
                ],
            }
            for i, (t, spans, _, _) in enumerate(documents(name))
        ]
        (folder / f"{name}.json").write_text(json.dumps(tasks), encoding="utf-8")
    return folder


def write_conllu(folder: Path) -> Path:
    folder.mkdir()
    for name in SPLITS:
        lines = []
        for d, (_, _, tokens, tags) in enumerate(documents(name)):
            lines.append(f"# newdoc id = {d}")
            for sentence, sentence_tags in zip(tokens, tags, strict=True):
                for k, (token, tag) in enumerate(zip(sentence, sentence_tags, strict=True), start=1):
                    lines.append(f"{k}\t{token}\t_\t_\t_\t_\t0\tdep\t_\tNE={tag}")
                lines.append("")
        (folder / f"{name}.conllu").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def _columns(corpus):
    return {n: (s.tokens, s.tags, s.docs) for n, s in corpus.splits.items()}


@pytest.mark.parametrize("write", [write_doccano, write_labelstudio, write_conllu])
@pytest.mark.parametrize("named", [False, True])
def test_an_export_gives_the_corpus_of_the_conll_files(tmp_path, write, named):
    folder = write(tmp_path / "data")
    fmt = {write_doccano: "doccano", write_labelstudio: "labelstudio", write_conllu: "conllu"}[write]
    files = load_corpus(str(TINY), None, "BIOES")
    export = load_corpus(str(folder), None, "BIOES", fmt=fmt if named else None)
    assert _columns(export) == _columns(files)
    assert sorted(p.name for p in data_files(str(folder))) == sorted(p.name for p in folder.iterdir())


def test_a_named_format_without_its_files_says_what_it_expected(tmp_path):
    with pytest.raises(
        MissingFileError, match=r"no split file of data.format=doccano \(expected train.jsonl"
    ):
        load_corpus(str(TINY), None, "BIOES", fmt="doccano")


@pytest.mark.system
def test_training_on_a_doccano_export_gives_the_same_weights(tmp_path):
    folder = write_doccano(tmp_path / "doccano")
    assert train.main(train_args(tmp_path / "files", "trainer.enable_progress_bar=false")) == 0
    assert (
        train.main(train_args(tmp_path / "export", "trainer.enable_progress_bar=false", f"data.dir={folder}"))
        == 0
    )
    files = load_file(tmp_path / "files" / "export" / "model.safetensors")
    export = load_file(tmp_path / "export" / "export" / "model.safetensors")
    assert files.keys() == export.keys() and len(files) > 5
    for key, tensor in files.items():
        assert torch.equal(tensor, export[key]), key  # bit for bit
    scores = [json.loads((tmp_path / run / "metrics.json").read_text()) for run in ("files", "export")]
    assert [(s["dev"]["f1"], s["test"]["f1"]) for s in scores][0] == [
        (s["dev"]["f1"], s["test"]["f1"]) for s in scores
    ][1]


def test_a_bad_export_is_one_error_naming_file_and_line(tmp_path):
    from ner_app.text.annotations.model import AnnotationFormatError

    folder = write_doccano(tmp_path / "data")
    lines = (folder / "valid.jsonl").read_text(encoding="utf-8").splitlines()
    lines[1] = lines[1][:-5]
    (folder / "valid.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(AnnotationFormatError, match=rf"^{folder}/valid.jsonl:2: not valid JSON"):
        load_corpus(str(folder), None, "BIOES")


def test_changed_spans_are_logged_before_training(tmp_path, caplog):
    folder = write_doccano(tmp_path / "data")
    first = json.loads((folder / "train.jsonl").read_text(encoding="utf-8").splitlines()[0])
    first["label"][0][1] -= 1  # 'Alice Smit': an edge inside a token
    rest = (folder / "train.jsonl").read_text(encoding="utf-8").splitlines()[1:]
    (folder / "train.jsonl").write_text("\n".join([json.dumps(first), *rest]) + "\n", encoding="utf-8")
    with caplog.at_level("WARNING", logger="ner_app"):
        corpus = load_corpus(str(folder), None, "BIOES")
    assert _columns(corpus) == _columns(load_corpus(str(TINY), None, "BIOES"))  # expanded back to the tokens
    assert (
        f"{folder}/train.jsonl:1: moved 'Alice Smit' (PER): an edge inside the tokens 'Alice Smith'; expanded to them"
        in caplog.text
    )


@pytest.mark.system
def test_a_skipped_task_is_not_trained_as_text_without_entities(tmp_path, caplog):
    """A skipped task and a task never annotated, added to train.json: the run leaves them out (their words
    never reach the vocabulary) and its log counts them; ``data.keep_unannotated=true`` trains them."""
    folder = write_labelstudio(tmp_path / "data")
    tasks = json.loads((folder / "train.json").read_text(encoding="utf-8"))
    skipped = {"result": [], "was_cancelled": True, "ground_truth": False}
    tasks += [
        {"id": 90, "data": {"text": "Zorblaxphone sold well ."}, "annotations": [skipped]},
        {"id": 91, "data": {"text": "Quuxcorp was never looked at ."}, "annotations": []},
    ]
    (folder / "train.json").write_text(json.dumps(tasks), encoding="utf-8")
    runs = {}
    for name, keep in (("left_out", "false"), ("kept", "true")):
        extra = ("trainer.enable_progress_bar=false", "trainer.max_epochs=1", f"data.keep_unannotated={keep}")
        caplog.clear()
        with caplog.at_level("WARNING", logger="ner_app"):
            assert train.main(train_args(tmp_path / name, f"data.dir={folder}", *extra)) == 0
        runs[name] = caplog.text
    assert (
        f"{folder}/train.json: 2 Label Studio tasks left out: 1 skipped (every annotation cancelled), 1 not "
        "annotated (data.keep_unannotated: true reads them as text without entities)" in runs["left_out"]
    )
    assert "2 Label Studio tasks read as text without entities" in runs["kept"]
    words = {name: (tmp_path / name / "export" / "tagger.json").read_text(encoding="utf-8") for name in runs}
    assert "zorblaxphone" not in words["left_out"] and "zorblaxphone" in words["kept"]
