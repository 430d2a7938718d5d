"""Document context through the pipeline: data documents, the layer cache, train.py, export, predict, embed."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

import train
from ner_app.bilm import load_bilm, save_bilm
from ner_app.bilm.document import context_layers, document_contexts, stream_layers
from ner_app.cli.commands import main
from ner_app.predict.predictor import Predictor, predict_conll
from ner_app.tagger.spec import ElmoRef, TaggerSizes, TaggerSpec
from ner_app.text.conll import read_conll
from ner_app.text.tags import entities
from ner_app.text.tokenizer import sentences as split_sentences
from ner_app.train.corpus import load_corpus
from ner_app.train.datamodule import ConllDataModule
from ner_app.train.layer_cache import LayerCache, fill_document_cache
from tests.helpers import random_bilm

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "data" / "tiny_conll"


def tiny_documents(path: Path) -> list[list[list[str]]]:
    """The -DOCSTART- documents of a CoNLL file, read independently of the data module."""
    docs: dict[int, list[list[str]]] = {}
    for sentence in read_conll(path):
        docs.setdefault(sentence.doc, []).append(sentence.tokens)
    return list(docs.values())


def datamodule(context: str, eval_batch_size: int = 64) -> ConllDataModule:
    """Corpus -> spec (with this ELMo context) -> DataModule, as train.py wires them."""
    corpus = load_corpus(str(TINY), None, "BIOES")
    train = corpus.splits["train"]
    sizes = TaggerSizes(
        word_dim=4, char_dim=2, char_filters=3, char_width=3, lstm_hidden=4, lstm_layers=1, dropout=0.0
    )
    elmo = ElmoRef("options.json", "weights.hdf5", "0" * 64, 0.0, False, context=context)
    spec = TaggerSpec.from_training_data(
        sizes, train.tokens, train.tags, corpus.scheme, corpus.source_scheme, elmo=elmo
    )
    return ConllDataModule(corpus, spec, eval_batch_size=eval_batch_size)


def test_datamodule_documents_are_the_docstart_blocks():
    dm = datamodule("document")
    for split, name in (("train", "train"), ("dev", "valid"), ("test", "test")):
        docs = [[dm.splits[split].tokens[i] for i in doc] for doc in dm.documents(split)]
        assert docs == tiny_documents(TINY / f"{name}.txt") and len(docs) == 2
        assert dm.splits[split].docs == [s.doc for s in read_conll(TINY / f"{name}.txt")]


@pytest.mark.parametrize("cached", [True, False])
def test_batches_carry_each_sentence_in_its_document(tmp_path, cached):
    bilm = random_bilm()
    dm = datamodule("document", eval_batch_size=3)
    if cached:
        cache = LayerCache.for_bilm(tmp_path, bilm)
        documents = [
            [split.tokens[i] for i in doc] for name, split in dm.splits.items() for doc in dm.documents(name)
        ]
        fill_document_cache(cache, documents, bilm)
        dm.use_layer_cache(cache)
    contexts = [c for doc in tiny_documents(TINY / "valid.txt") for c in document_contexts(doc)]
    seen = 0
    for batch in dm.dataloader("dev"):
        expected = [contexts[i] for i in batch["index"].tolist()]
        with torch.inference_mode():
            ref_layers, ref_mask = context_layers(bilm, expected)
        if cached:
            layers, mask = batch["features"]["elmo"]["layers"], batch["features"]["elmo"]["mask"]
            assert torch.equal(mask, ref_mask)
            for got, ref in zip(layers, ref_layers, strict=True):
                torch.testing.assert_close(got, ref.half().float(), atol=2e-3, rtol=0)  # fp16 rows
        else:
            assert batch["features"]["elmo"]["context"] == expected
        seen += len(expected)
    assert seen == len(contexts)
    if cached:  # sentence-mode rows of the same sentences are other rows (sentence mode keys)
        sentence_mode = datamodule("sentence")
        sentence_mode.use_layer_cache(cache)
        with pytest.raises(KeyError, match="not in the layer cache"):
            next(iter(sentence_mode.dataloader("dev")))


@pytest.fixture(scope="module")
def doc_run(tmp_path_factory):
    """A tiny document-context run (layer cache on); its export is shared by the tests below."""
    tmp = tmp_path_factory.mktemp("doc")
    options, weights = save_bilm(random_bilm(), tmp / "bilm")
    code = train.main(
        [
            "--config",
            str(ROOT / "configs/tiny.yaml"),
            f"output_dir={tmp / 'run'}",
            f"data.dir={TINY}",
            f"elmo.options={options}",
            f"elmo.weights={weights}",
            f"elmo.cache_dir={tmp / 'cache'}",
            "elmo.context=document",
            "trainer.patience=6",  # stops a few epochs after dev F1 reaches 1.0
        ]
    )
    assert code == 0
    return tmp / "run"


@pytest.mark.system
def test_document_run_trains_to_f1_one_and_exports_its_context(doc_run):
    metrics = json.loads((doc_run / "metrics.json").read_text())
    assert metrics["dev"]["f1"] == 100.0 and metrics["test"]["f1"] == 100.0
    spec = json.loads((doc_run / "export" / "tagger.json").read_text())
    elmo = next(f for f in spec["features"] if f["name"] == "elmo")
    assert elmo["context"] == "document" and elmo["max_stream_positions"] == 2048


@pytest.mark.system
def test_document_run_without_cache(tmp_path, tiny_bilm_files):
    options, weights = tiny_bilm_files
    code = train.main(
        [
            "--config",
            str(ROOT / "configs/tiny.yaml"),
            f"output_dir={tmp_path / 'run'}",
            f"data.dir={TINY}",
            f"elmo.options={options}",
            f"elmo.weights={weights}",
            "elmo.cache_dir=null",
            "elmo.context=document",
            "trainer.max_epochs=2",
        ]
    )
    assert code == 0 and (tmp_path / "run" / "metrics.json").is_file()


def test_bad_stream_cap_is_one_clear_error(tmp_path, tiny_bilm_files, capsys):
    options, weights = tiny_bilm_files
    args = [
        "--config",
        str(ROOT / "configs/tiny.yaml"),
        f"output_dir={tmp_path}",
        f"data.dir={TINY}",
        f"elmo.options={options}",
        f"elmo.weights={weights}",
        "elmo.max_stream_positions=1",
    ]
    assert train.main(args) == 2
    assert "elmo.max_stream_positions: expected at least 2" in capsys.readouterr().err


@pytest.mark.system
def test_predict_reads_conll_documents_like_training(doc_run):
    predictor = Predictor.from_export(doc_run / "export")
    assert predictor.spec.elmo is not None and predictor.spec.elmo.context == "document"
    gold = read_conll(TINY / "valid.txt")
    tagged = predictor.tag([s.tokens for s in gold], [s.doc for s in gold])
    written = [
        line.split(" ") for line in (doc_run / "predictions_dev.conll").read_text().split("\n") if line
    ]
    assert [t for tags, _ in tagged for t in predictor.to_source(tags)] == [row[2] for row in written]
    # --format conll: -DOCSTART- lines separate documents; without any, the file is one document
    text = (TINY / "valid.txt").read_text().split("\n")
    by_docs = [line.split()[-1] for line in predict_conll(predictor, text) if line and "DOCSTART" not in line]
    assert by_docs == [t for tags, _ in tagged for t in predictor.to_source(tags)]
    no_docstart = [line for line in text if "DOCSTART" not in line]
    one_doc = predictor.tag([s.tokens for s in gold], [0] * len(gold))
    scores = [line.split()[-1] for line in predict_conll(predictor, no_docstart) if line]
    assert scores == [t for tags, _ in one_doc for t in predictor.to_source(tags)]


@pytest.mark.system
def test_predict_text_line_is_one_document(doc_run):
    predictor = Predictor.from_export(doc_run / "export")
    line = "Alice Smith flew to Paris. Carol met Bob Jones in Berlin. Acme Corp hired Dave."
    obj = next(predictor.predict_texts([line]))
    found = split_sentences(line)
    assert len(found) == 3
    sentences = [[t.text for t in sentence] for sentence in found]
    as_document = predictor.tag(sentences, [0, 0, 0])
    read = predictor.read(sentences, [0, 0, 0])  # each entity's score: its reading's probability
    expected = []
    for sentence, (tags, _), reading in zip(found, as_document, read, strict=True):
        assert [(kind, s, e) for (s, e, kind), _ in reading.entities] == entities(tags, predictor.scheme)
        for (start, end, kind), p in reading.entities:
            s, e = sentence[start].start, sentence[end - 1].end
            expected.append({"start": s, "end": e, "type": kind, "text": line[s:e], "score": round(p, 4)})
    assert obj["entities"] == expected and expected
    assert all(line[x["start"] : x["end"]] == x["text"] for x in expected)
    separate = predictor.tag(sentences, [0, 1, 2])  # each sentence its own document
    assert [s for _, s in as_document] != [s for _, s in separate]  # the context changes the marginals
    assert predictor.spec.elmo is not None  # the same tagger, its spec in sentence context
    sentence = dataclasses.replace(predictor.spec.elmo, context="sentence")
    predictor.spec = dataclasses.replace(
        predictor.spec, features=tuple(sentence if f.name == "elmo" else f for f in predictor.spec.features)
    )
    sentence_mode = predictor.tag(sentences, [0, 1, 2])  # one-sentence documents are sentence mode
    assert [t for t, _ in sentence_mode] == [t for t, _ in separate]
    for (_, a), (_, b) in zip(sentence_mode, separate, strict=True):
        assert a == pytest.approx(b, abs=1e-6)


def test_embed_document_context(tmp_path, tiny_bilm_files, capsys):
    options, weights = tiny_bilm_files
    lines = [
        "The EU rejects German call .",
        "Peter Blackburn",
        "",
        "BRUSSELS 1996-08-22",
        "",
        "",
        "a b a",
        "c",
    ]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    common = [
        "embed",
        "--options",
        str(options),
        "--weights",
        str(weights),
        "--input",
        str(tmp_path / "in.txt"),
    ]
    assert main([*common, "--output", str(tmp_path / "doc.hdf5"), "--context", "document"]) == 0
    assert main([*common, "--output", str(tmp_path / "sent.hdf5")]) == 0
    bilm = load_bilm(options, weights).eval()
    documents = [[0, 1], [3], [6, 7]]
    with h5py.File(tmp_path / "doc.hdf5") as doc, h5py.File(tmp_path / "sent.hdf5") as sent:
        assert sorted(doc.keys(), key=int) == [str(i) for i in range(len(lines))]
        for i in (2, 4, 5):
            assert doc[str(i)].shape == (3, 0, 12) and doc[str(i)].dtype == np.float32
        for rows in documents:
            with torch.inference_mode():
                (streams,) = stream_layers(bilm, [[lines[i].split(" ") for i in rows]])
            for i, ref in zip(rows, streams, strict=True):
                np.testing.assert_allclose(doc[str(i)][...], ref[:, 1:-1].numpy(), atol=1e-6, rtol=1e-6)
        np.testing.assert_allclose(doc["3"][...], sent["3"][...], atol=1e-6, rtol=1e-6)  # a lone line
        assert not np.allclose(doc["0"][1:], sent["0"][1:], atol=1e-3)  # its neighbour is read too
    assert main([*common, "--output", str(tmp_path / "x.hdf5"), "--context", "document", "--stateful"]) == 2
    assert "--stateful and --context document cannot be combined" in capsys.readouterr().err


@pytest.mark.system
def test_embed_help_names_the_context():
    result = subprocess.run(
        [sys.executable, "-m", "ner_app", "embed", "--help"], capture_output=True, text=True
    )
    assert "--context {sentence,document}" in result.stdout
