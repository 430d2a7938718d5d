"""Export, load without pickle, and predict: same tags as in training, exact character offsets."""

import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import train
from ner_app.cli.commands import main
from ner_app.predict.predictor import Predictor
from ner_app.tagger.export import ExportError, load_export
from ner_app.tagger.integrity import IntegrityError
from ner_app.text.conll import read_conll

pytestmark = pytest.mark.system  # trains a tiny run, starts predict processes: out of the fast lane

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "data" / "tiny_conll"


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One tiny training run shared by the tests of this file (with the frozen-layer cache on)."""
    from ner_app.bilm import save_bilm
    from tests.helpers import random_bilm

    tmp = tmp_path_factory.mktemp("trained")
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
        ]
    )
    assert code == 0
    return tmp / "run"


def test_export_predicts_what_training_predicted(trained):
    predictor = Predictor.from_export(trained / "export")
    gold = read_conll(TINY / "valid.txt")
    tagged = predictor.tag([s.tokens for s in gold])
    written = [
        line.split(" ") for line in (trained / "predictions_dev.conll").read_text().split("\n") if line
    ]
    assert [t for tags, _ in tagged for t in predictor.to_source(tags)] == [row[2] for row in written]
    assert all(0.0 < p <= 1.0 for _, scores in tagged for p in scores)


@pytest.mark.filterwarnings("ignore:You are using a custom batch sampler")
def test_plain_loop_equals_lightnings_predict_loop(trained):
    """Prediction without Lightning gives bit for bit the tags and scores of Lightning's predict loop over
    ``TaggerModule.predict_step`` (the path predict took before), batched by the training sampler."""
    from torch.utils.data import DataLoader

    from ner_app.predict.predictor import PREDICT_MAX_TOKENS
    from ner_app.runtime.trainer import evaluation_trainer
    from ner_app.tagger.batch import encode_batch
    from ner_app.train.module import TaggerModule
    from ner_app.train.sampler import LengthBucketSampler

    predictor = Predictor.from_export(trained / "export", batch_size=8)
    sentences = [s.tokens for s in read_conll(TINY / "valid.txt")]
    spec = predictor.spec
    loader = DataLoader(
        list(enumerate(sentences)),  # type: ignore[arg-type]
        batch_sampler=LengthBucketSampler([len(s) for s in sentences], 8, max_tokens=PREDICT_MAX_TOKENS),
        collate_fn=lambda items: encode_batch([t for _, t in items], spec, index=[i for i, _ in items]),
    )
    module = TaggerModule(predictor.tagger, spec, gold={})
    lightning: dict[int, tuple[list[str], list[float]]] = {}
    for index, paths, chosen in evaluation_trainer().predict(module, dataloaders=loader) or []:
        for row, i in enumerate(index.tolist()):
            n = len(sentences[i])
            lightning[i] = (spec.tag_vocab.decode(paths[row, :n].tolist()), chosen[row, :n].tolist())
    assert predictor.tag(sentences) == [lightning[i] for i in range(len(sentences))]


def test_export_command_from_checkpoint_equals_end_of_training_export(trained, tmp_path):
    assert (
        main(["export", "--checkpoint", str(trained / "checkpoints/best.ckpt"), "--output", str(tmp_path)])
        == 0
    )
    a, _ = load_export(trained / "export")
    b, spec = load_export(tmp_path)
    for (name, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items(), strict=True):
        assert torch.equal(x, y), name
    assert spec.source_scheme == "IOB1" and spec.scheme == "BIOES"


def test_loading_an_export_runs_no_pickle(trained, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("pickle used while loading an export")

    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "loads", refuse)
    monkeypatch.setattr(torch, "load", refuse)
    predictor = Predictor.from_export(trained / "export")
    assert predictor.tag([["Alice", "flew"]])[0][0]


def test_export_errors(trained, tmp_path):
    with pytest.raises(ExportError, match="not a ner_app export \\(missing tagger.json\\)"):
        load_export(tmp_path)
    copy = tmp_path / "copy"
    subprocess.run(["cp", "-r", str(trained / "export"), str(copy)], check=True)
    import h5py

    with h5py.File(copy / "bilm/weights.hdf5", "a") as f:
        f["CNN_proj/b_proj"][0] += 1.0
    with pytest.raises(ExportError, match="biLM weights differ from those the tagger was trained with"):
        load_export(copy)


TEXTS = [
    'Alice Smith flew to "Paris" (France) on 1996-08-22, said Bob\'s friend.',
    "",
    "   ",
    "Zürich, São Paulo and 東京: Carol met Dave — Dave met Carol. 😀 Paris? Paris!",
    "Paris Paris Paris Berlin Berlin",
    "Acme Corp. hired Mr. Jones in Berlin; U.S. officials didn't comment.",
]


def run_predict(export: Path, text: str, *extra: str) -> list[str]:
    result = subprocess.run(
        [sys.executable, "-m", "ner_app", "predict", "--model", str(export), "--input", "-", *extra],
        input=text,
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.splitlines()


def test_predict_text_offsets_are_exact(trained):
    lines = run_predict(trained / "export", "\n".join(TEXTS) + "\n")
    assert len(lines) == len(TEXTS)
    found = 0
    for line, out in zip(TEXTS, lines, strict=True):
        obj = json.loads(out)
        assert obj["text"] == line
        for entity in obj["entities"]:
            assert line[entity["start"] : entity["end"]] == entity["text"]
            assert entity["type"] in {"PER", "LOC", "ORG", "MISC"} and 0 < entity["score"] <= 1
            found += 1
    assert json.loads(lines[1]) == {"text": "", "entities": []}
    assert found > 0


def test_format_text_is_jsonl_and_says_so_once(trained, tmp_path, capsys):
    """``--format text`` (the old name) prints what ``--format jsonl`` prints, with one note on stderr."""
    from ner_app.report import formats

    news = tmp_path / "news.txt"
    news.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    common = ["predict", "--model", str(trained / "export"), "--input", str(news)]
    assert main([*common, "--format", "jsonl"]) == 0
    jsonl = capsys.readouterr()
    assert jsonl.err == ""
    formats._noted.clear()  # a fresh process: the note has not been given yet
    for _ in range(2):
        assert main([*common, "--format", "text"]) == 0
    text = capsys.readouterr()
    assert text.out == jsonl.out * 2 and text.out.count("\n") == 2 * len(TEXTS)
    assert text.err.splitlines() == ["--format text is now called --format jsonl; it writes the same output"]
    assert [json.loads(line) for line in jsonl.out.splitlines()] == list(
        Predictor.from_export(trained / "export").predict_texts(TEXTS)
    )


def test_a_new_output_format_is_one_entry(trained, tmp_path, capsys, monkeypatch):
    """The recipe of docs/architecture.md: one ``OutputFormat`` in ``FORMATS`` makes a ``--format`` that
    predict accepts, lists in its help and writes, from the same records as the other formats."""
    from ner_app.cli.parser import build_parser
    from ner_app.report import formats

    def write_spans(records, target):
        for record in records:
            yield " ".join(f"{e.start}:{e.end}:{e.type}" for e in record.entities) + "\n"

    spans = formats.OutputFormat("spans", "text", write_spans, "start:end:type of every entity")
    monkeypatch.setitem(formats.FORMATS, "spans", spans)
    assert build_parser().parse_args(["predict", "--input", "-", "--format", "spans"]).format == "spans"
    assert "spans: start:end:type of every entity" in formats.format_help()
    news = tmp_path / "news.txt"
    news.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    assert (
        main(["predict", "--model", str(trained / "export"), "--input", str(news), "--format", "spans"]) == 0
    )
    out = capsys.readouterr().out.splitlines()
    expected = Predictor.from_export(trained / "export").predict_texts(TEXTS)
    assert out == [" ".join(f"{e['start']}:{e['end']}:{e['type']}" for e in r["entities"]) for r in expected]
    assert any(out)


def test_predict_very_long_line(trained):
    line = " ".join(["Alice", "flew", "to", "Paris", "and"] * 1200)  # 6,000 tokens, no sentence breaks
    obj = Predictor.from_export(trained / "export").predict_texts([line]).__next__()
    assert all(line[e["start"] : e["end"]] == e["text"] for e in obj["entities"])
    assert len(obj["entities"]) > 1000


def test_predict_conll_appends_a_tag_per_token(trained):
    text = (TINY / "test.txt").read_text()
    out = run_predict(trained / "export", text, "--format", "conll")
    inp = text.rstrip("\n").split("\n")
    assert len(out) == len(inp)
    for a, b in zip(inp, out, strict=True):
        if a.strip() and not a.startswith("-DOCSTART-"):
            assert b.startswith(a + " ") and b.split()[-1] in {
                "O",
                "I-PER",
                "I-LOC",
                "I-ORG",
                "I-MISC",
                "B-LOC",
            }
        else:
            assert a == b


@pytest.mark.slow
def test_predict_conll_tokenises_raw_text_first(trained):
    """Raw text lines (one line, or lines of differing word counts) are tokenised as the jsonl path does:
    ``token tag`` lines per token, a blank line after each input line, the entities of ``--format jsonl``."""
    from ner_app.text.tags import entities
    from ner_app.text.tokenizer import sentences

    export = trained / "export"
    for text in ([TEXTS[0]], TEXTS):
        out = run_predict(export, "\n".join(text) + "\n", "--format", "conll")
        objects = [json.loads(line) for line in run_predict(export, "\n".join(text) + "\n")]
        blocks, block = [], []
        for row in out:  # one block per input line
            if row == "":
                blocks.append(block)
                block = []
            else:
                block.append(row.split(" "))
        assert block == [] and len(blocks) == len(text) == len(objects)
        for line, rows, obj in zip(text, blocks, objects, strict=True):
            tokens = [t for sentence in sentences(line, max_tokens=250) for t in sentence]
            assert [r[0] for r in rows] == [t.text for t in tokens] and all(len(r) == 2 for r in rows)
            found = [
                (tokens[a].start, tokens[b - 1].end, kind)
                for kind, a, b in entities([r[1] for r in rows], "IOB1")
            ]
            assert found == [(e["start"], e["end"], e["type"]) for e in obj["entities"]]
    assert sum(len(b) for b in blocks) > len(TEXTS)  # not one token per line
    # token lines stay token lines: without -DOCSTART-, one column per line and sentences of several lines
    tokens_only = "Alice\nSmith\nflew\n\nBob\nsaid\n"
    assert [r.split(" ")[0] for r in run_predict(export, tokens_only, "--format", "conll")] == [
        "Alice",
        "Smith",
        "flew",
        "",
        "Bob",
        "said",
    ]


def test_predict_command_reads_files(trained, tmp_path, capsys):
    """The documented file commands: text lines to JSON lines, and a CoNLL file to tagged token lines."""
    news = tmp_path / "news.txt"
    news.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    assert main(["predict", "--model", str(trained / "export"), "--input", str(news)]) == 0
    objects = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    expected = list(Predictor.from_export(trained / "export").predict_texts(TEXTS))
    assert objects == expected and len(objects) == len(TEXTS)
    # --format conll on the test file tags it as training's own evaluation of the same checkpoint did
    test_file = TINY / "test.txt"
    assert (
        main(["predict", "--model", str(trained / "export"), "--input", str(test_file), "--format", "conll"])
        == 0
    )
    out = capsys.readouterr().out.splitlines()
    tagged = [line.split() for line in out if line and not line.startswith("-DOCSTART-")]
    written = [
        line.split(" ") for line in (trained / "predictions_test.conll").read_text().split("\n") if line
    ]
    assert [row[0] for row in tagged] == [row[0] for row in written]
    assert [row[-1] for row in tagged] == [row[2] for row in written]


# ------------------------------------------------------------------ nothing a user points export at is lost
def export_to(trained: Path, output: Path) -> int:
    return main(["export", "--checkpoint", str(trained / "checkpoints/best.ckpt"), "--output", str(output)])


def test_export_replaces_its_own_export_and_nothing_else(trained, tmp_path, capsys):
    notes = tmp_path / "mine" / "notes.txt"
    notes.parent.mkdir()
    notes.write_text("a user's notes")
    assert export_to(trained, notes.parent) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert (
        len(err) == 1
        and "exists and is not an earlier output of export, or was changed since (it holds notes.txt)"
        in err[0]
    )
    assert notes.read_text() == "a user's notes" and sorted(p.name for p in tmp_path.iterdir()) == ["mine"]
    file = tmp_path / "model.bin"
    file.write_bytes(b"keep")
    assert export_to(trained, file) == 2 and file.read_bytes() == b"keep"
    assert "exists and is not a folder" in capsys.readouterr().err
    out = tmp_path / "export"
    assert export_to(trained, out) == 0 and export_to(trained, out) == 0  # its own export: replaced
    assert sorted(p.name for p in out.iterdir()) == [".ner-app", "bilm", "model.safetensors", "tagger.json"]
    (out / "extra.txt").write_text("added by hand")
    assert export_to(trained, out) == 2 and (out / "extra.txt").is_file()
    empty = tmp_path / "empty"
    empty.mkdir()
    assert export_to(trained, empty) == 0 and (empty / "tagger.json").is_file()


def test_html_outputs_never_overwrite_a_runs_files(trained, tmp_path, capsys):
    metrics = trained / "metrics.json"
    before = metrics.read_bytes()
    assert main(["report", str(trained), "--output", str(metrics)]) == 2
    assert "exists and is not an earlier output of report (or was changed since)" in capsys.readouterr().err
    assert main(["compare", str(trained), "--html", str(metrics)]) == 2
    assert metrics.read_bytes() == before
    page = tmp_path / "page.html"
    assert main(["report", str(trained), "--output", str(page)]) == 0
    assert main(["report", str(trained), "--output", str(page)]) == 0  # its own earlier page is replaced
    assert main(["report", str(trained)]) == 0  # the page train drew is redrawn
    assert main(["compare", str(trained), "--html", str(page)]) == 2  # another command's page is not
    assert "exists and is not an earlier output of compare" in capsys.readouterr().err
    assert main(["compare", str(trained), "--html", str(page), "--overwrite"]) == 0


# ------------------------------------------------------------------ an export is closed and fully checked
def tampered_copy(trained: Path, tmp_path: Path, edit) -> Path:
    out = tmp_path / "export"
    shutil.copytree(trained / "export", out)
    spec = json.loads((out / "tagger.json").read_text())
    edit(spec)
    (out / "tagger.json").write_text(json.dumps(spec))
    return out


def _elmo(spec: dict) -> dict:
    """The ELMo entry of a ``tagger.json``'s features."""
    return next(f for f in spec["features"] if f["name"] == "elmo")


@pytest.mark.parametrize(
    "edit",
    [
        lambda s: s.update(max_word_chars=3),
        lambda s: _elmo(s).update(do_layer_norm=True),
        lambda s: _elmo(s).update(context="document"),
        lambda s: _elmo(s).update(max_stream_positions=10),
        lambda s: _elmo(s).update(at_output=True),
    ],
)
def test_every_key_that_changes_predictions_is_checked(trained, tmp_path, edit):
    with pytest.raises(IntegrityError, match="a key that changes predictions .* was changed after export"):
        load_export(tampered_copy(trained, tmp_path, edit))


@pytest.mark.parametrize("where", ["/etc/passwd", "../export/bilm/options.json", "bilm", "fifo", "/dev/zero"])
def test_an_export_reads_only_its_own_files(trained, tmp_path, where):
    """Even an export older than the full checksum (no ``spec_sha256``) cannot point outside itself."""

    def edit(spec):
        _elmo(spec)["options"] = where
        del spec["integrity"]["spec_sha256"]

    out = tampered_copy(trained, tmp_path, edit)
    os.mkfifo(out / "fifo")
    with pytest.raises(ExportError, match="biLM path .* (leaves the export|is not a regular file inside)"):
        load_export(out)


def test_exported_files_are_readable_like_any_other_file(trained):
    """safetensors and temporary files start private (0600): an export gets the mode the umask gives."""
    umask = os.umask(0)
    os.umask(umask)
    for path in (trained / "export").rglob("*"):
        want = (0o777 if path.is_dir() else 0o666) & ~umask
        assert path.stat().st_mode & 0o777 == want, path
