"""Hostile and careless input to ``check-data`` and to the pre-annotation outputs of ``predict``: each case is
one ``error:`` line naming the file (and line) and what was expected, exit code 2, never a traceback, and
nothing written or replaced that the command did not write."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ner_app import limits
from ner_app.cli.commands import main
from tests.helpers import TINY, one_error_line

GOOD = json.dumps({"text": "Sony hired Bob.", "label": [[0, 4, "ORG"], [11, 14, "PER"]]})


def folder_of(tmp_path: Path, train: bytes, suffix: str = ".jsonl") -> Path:
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / f"train{suffix}").write_bytes(train)
    for name in ("valid", "test"):
        (folder / f"{name}{suffix}").write_text(GOOD + "\n", encoding="utf-8")
    return folder


@pytest.mark.parametrize(
    ("train", "where"),
    [
        (f'{GOOD}\n{{"text": "x", "label": [}}\n'.encode(), "train.jsonl:2: not valid JSON"),
        (
            json.dumps({"text": "Sony", "label": [[0, 9, "ORG"]]}).encode(),
            "train.jsonl:1: end offset 9 is beyond",
        ),
        (
            json.dumps({"text": "Sony", "label": [[-1, 2, "ORG"]]}).encode(),
            "train.jsonl:1: start offset -1 is negative",
        ),
        (json.dumps({"text": "Sony", "label": [[3, 3, "ORG"]]}).encode(), "train.jsonl:1: start 3 >= end 3"),
        (b"", "train.jsonl: empty export"),
        (
            GOOD.encode() + b"\n" + '{"text": "caf\xe9"}'.encode("latin-1"),
            "train.jsonl:2: expected UTF-8 text",
        ),
        (
            json.dumps({"text": "Sony", "label": [[0, 4, "Big Firm"]]}).encode(),
            "train.jsonl:1: label 'Big Firm'",
        ),
        (json.dumps({"text": "Sony", "label": [[0, 4, ""]]}).encode(), "train.jsonl:1: expected a label"),
    ],
    ids=[
        "malformed json",
        "offset beyond",
        "negative offset",
        "empty span",
        "empty export",
        "mixed encodings",
        "label with a space",
        "empty label",
    ],
)
def test_a_bad_split_file_is_one_line_naming_it(tmp_path, capsys, train, where):
    folder = folder_of(tmp_path, train)
    assert main(["check-data", str(folder), "--format", "doccano"]) == 2
    one_error_line(capsys, f"{folder}/{where}")
    assert capsys.readouterr().out == ""  # no half report


def test_a_label_studio_flag_of_another_type_is_one_line(tmp_path, capsys):
    """``was_cancelled`` decides whether a task is trained: a value other than true or false is refused."""
    tasks = [{"id": 4, "data": {"text": "Sony"}, "annotations": [{"result": [], "was_cancelled": "false"}]}]
    folder = folder_of(tmp_path, json.dumps(tasks).encode(), ".json")  # train is read first
    assert main(["check-data", str(folder)]) == 2
    one_error_line(
        capsys,
        f"{folder}/train.json:task 4, annotation 1: expected 'was_cancelled' true or false, found str \"false\"",
    )
    assert capsys.readouterr().out == ""


def test_a_line_over_the_bound_is_refused_before_it_is_read(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(limits, "MAX_ANNOTATION_LINE_BYTES", 1000)
    folder = folder_of(tmp_path, json.dumps({"text": "x" * 5000, "label": []}).encode())
    assert main(["check-data", str(folder), "--format", "doccano"]) == 2
    one_error_line(capsys, f"{folder}/train.jsonl:1: a line longer than 1,000 bytes")


def test_brat_ann_without_txt(tmp_path, capsys):
    folder = tmp_path / "data"
    for name in ("train", "valid", "test"):
        (folder / name).mkdir(parents=True)
        (folder / name / "a.ann").write_text("T1\tORG 0 4\tSony\n", encoding="utf-8")
    assert main(["check-data", str(folder), "--format", "brat"]) == 2
    one_error_line(capsys, "train/a.ann: no a.txt beside it")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "give one of --config CONFIG, a folder DIR, or --train FILE"),
        (["{tmp}/none"], "{tmp}/none: not a folder"),
        (["--train", "{tmp}/none.txt"], "{tmp}/none.txt: not found"),
        (["{tmp}", "--train", str(TINY / "train.txt")], "give one of"),
        (["{tmp}"], "{tmp}/train.txt: not found"),
        (["--train", str(TINY / "train.txt"), "--labels", "A=B=C,D"], "--labels: expected OLD=NEW pairs"),
    ],
    ids=["nothing", "no folder", "no file", "two sources", "empty folder", "bad labels"],
)
def test_careless_arguments(tmp_path, capsys, argv, message):
    assert main(["check-data", *(a.format(tmp=tmp_path) for a in argv)]) == 2
    one_error_line(capsys, message.format(tmp=tmp_path))


def test_a_config_of_a_hub_dataset_is_refused(tmp_path, capsys):
    config = tmp_path / "c.yaml"
    config.write_text("data:\n  dir: null\n  hub_name: lhoestq/conll2003\n", encoding="utf-8")
    assert main(["check-data", "--config", str(config)]) == 2
    one_error_line(capsys, "check-data reads the files of data.dir")


def test_a_bad_data_key_stops_training_before_anything_heavy(tmp_path, capsys):
    import train
    from tests.helpers import train_args

    assert train.main(train_args(tmp_path / "run", "data.labels=ORG")) == 2
    one_error_line(capsys, "data.labels: expected OLD=NEW pairs")
    assert not (tmp_path / "run").exists()


# --------------------------------------------------------------------------- predict's pre-annotation outputs
def test_brat_needs_a_folder(trained, tmp_path, capsys):
    news = tmp_path / "news.txt"
    news.write_text("Alice Smith flew to Paris .\n", encoding="utf-8")
    model = str(trained / "export")
    assert main(["predict", "--model", model, "--input", str(news), "--format", "brat"]) == 2
    one_error_line(capsys, "--format brat writes a folder of files: name it with --output DIR")
    assert main(["predict", "--model", model, "--input", str(news), "--format", "brat", "--output", "-"]) == 2
    one_error_line(capsys, "--output names a folder, not -")


def test_predict_never_replaces_what_it_did_not_write(trained, tmp_path, capsys):
    news = tmp_path / "news.txt"
    news.write_text("Alice Smith flew to Paris .\n", encoding="utf-8")
    model = str(trained / "export")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me", encoding="utf-8")
    base = ["predict", "--model", model, "--input", str(news)]
    # into a folder it did not make: its own files beside the user's, nothing removed
    assert main([*base, "--format", "brat", "--output", str(mine)]) == 0
    assert (mine / "notes.txt").read_text(encoding="utf-8") == "keep me"
    assert (mine / "doc000001.ann").is_file()
    assert main([*base, "--format", "doccano", "--output", str(news)]) == 2
    one_error_line(capsys, "is the input (or holds it)")
    assert main([*base, "--format", "doccano", "--output", str(mine)]) == 2  # a file format, a folder named
    one_error_line(capsys, f"--output {mine}")
    assert main([*base, "--format", "brat", "--output", str(tmp_path)]) == 2  # the folder holding the input
    one_error_line(capsys, "is the input (or holds it)")
    assert news.read_text(encoding="utf-8") == "Alice Smith flew to Paris .\n"
    # its own folder it replaces
    out = tmp_path / "pre"
    assert main([*base, "--format", "brat", "--output", str(out)]) == 0
    assert main([*base, "--format", "brat", "--output", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == [
        ".ner-app",
        "annotation.conf",
        "doc000001.ann",
        "doc000001.txt",
    ]


def test_a_label_studio_file_of_predictions_converts_only_when_it_is_one(tmp_path, capsys):
    """A task without 'annotations' is read from its predictions; a task of another project type is still
    refused."""
    path = tmp_path / "pre.json"
    task = {
        "data": {"image": "/data/1.jpg"},
        "predictions": [
            {"result": [{"type": "rectanglelabels", "value": {"x": 1, "rectanglelabels": ["Car"]}}]}
        ],
    }
    path.write_text(json.dumps([task]), encoding="utf-8")
    assert main(["convert", str(path), "--from", "labelstudio", "--output", str(tmp_path / "o.conll")]) == 2
    one_error_line(capsys, f"{path}:task 1: expected the task's text in data.text")


def conll_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "conll"
    folder.mkdir()
    for name in ("train", "valid", "test"):
        (folder / f"{name}.txt").write_text("Sony B-ORG\nin O\nParis B-LOC\n\n", encoding="utf-8")
    return folder


def test_types_and_labels_apply_to_conll_splits(tmp_path, capsys):
    """``--types`` and ``--labels`` (``data.types``, ``data.labels``) apply to CoNLL splits as to every format:
    the type left out is named, the renamed one counted under its new name."""
    folder = conll_folder(tmp_path)
    assert main(["check-data", str(folder), "--types", "ORG", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert {t for split in report["splits"].values() for t in split["entities"]} == {"ORG"}
    assert main(["check-data", str(folder), "--labels", "ORG=COMPANY"]) == 0
    out = capsys.readouterr().out
    assert "  COMPANY " in out and "  ORG " not in out
    assert main(["check-data", str(folder), "--types", "ORG"]) == 0
    assert (
        f"{folder}/train.txt:3: left out 'Paris' (LOC): its type is not among --types"
        in capsys.readouterr().out
    )


def test_a_split_in_two_formats_is_refused_naming_both(tmp_path, capsys):
    """A stale ``train.txt`` beside the ``train.jsonl`` meant: neither silently wins."""
    folder = conll_folder(tmp_path)
    (folder / "train.jsonl").write_text(GOOD + "\n", encoding="utf-8")
    assert main(["check-data", str(folder)]) == 2
    one_error_line(
        capsys, f"{folder}/train.txt and {folder}/train.jsonl: two files of split train in {folder}"
    )
    assert main(["check-data", str(folder), "--format", "conll"]) == 0  # the format named picks one
    assert f"train: {folder}/train.txt;" in capsys.readouterr().out


def test_a_split_linked_from_outside_the_data_folder_is_refused(tmp_path, capsys):
    """A data folder's split that is a symbolic link to a file outside it is refused, naming it (training reads
    the same ``split_file``); a link to a file inside the folder is read."""
    folder = conll_folder(tmp_path)
    outside = tmp_path / "elsewhere.txt"
    outside.write_bytes((folder / "train.txt").read_bytes())
    (folder / "train.txt").unlink()
    (folder / "train.txt").symlink_to(outside)
    assert main(["check-data", str(folder)]) == 2
    one_error_line(capsys, f"{folder}/train.txt: a symbolic link to {outside}, outside {folder}")
    (folder / "train.txt").unlink()
    (folder / "train_copy.txt").write_bytes(outside.read_bytes())
    (folder / "train.txt").symlink_to(folder / "train_copy.txt")
    assert main(["check-data", str(folder)]) in (0, 1)  # read: its problems, if any, are the data's


def test_messages_name_check_datas_own_options(tmp_path, capsys):
    """A file whose format cannot be told is named with ``--format`` (check-data has no ``--from``); an empty
    ``.jsonl`` says it is empty."""
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "train.jsonl").write_text(json.dumps({"text": "Sony", "other": 1}) + "\n", encoding="utf-8")
    for name in ("valid", "test"):
        (folder / f"{name}.jsonl").write_text(GOOD + "\n", encoding="utf-8")
    assert main(["check-data", str(folder)]) == 2
    line = one_error_line(
        capsys, f"{folder}/train.jsonl:1: cannot tell which JSONL format", "name it with --format"
    )
    assert "--from" not in line
    (folder / "train.jsonl").write_bytes(b"")
    assert main(["check-data", str(folder)]) == 2
    one_error_line(capsys, f"{folder}/train.jsonl: empty")
