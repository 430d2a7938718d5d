"""Hostile and careless input to ``compare`` (tables, ``--json``, ``--html``) and ``report``: each bad case is
one ``error:`` line and exit code 2 with nothing on stdout; odd folder names come out intact and harmless."""

from __future__ import annotations

import json
import re
import shutil
import stat
from pathlib import Path

import pytest

from ner_app.cli.commands import main


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path.parent


CASES = {
    "missing": (lambda t, r: t / "missing", "missing: no such folder"),
    "a file": (lambda t, r: write(t / "f" / "x", "") / "x", "x: is a file, expected a run folder"),
    "empty folder": (lambda t, r: t, "not a run folder (no metrics.json or config.yaml)"),
    "unfinished": (
        lambda t, r: write(t / "u" / "config.yaml", "seed: 1\n"),
        "no metrics.json, the run has not finished",
    ),
    "not JSON": (lambda t, r: write(t / "j" / "metrics.json", '{"dev": '), "metrics.json:1: not valid JSON"),
    "NaN": (
        lambda t, r: write(t / "n" / "metrics.json", '{"dev": {"f1": NaN}, "test": {"f1": 1}}'),
        "metrics.json: dev.f1: expected a finite number, found nan",
    ),
    "same seed twice": (lambda t, r: shutil.copytree(r, t / "again"), "two runs of one config with seed 7"),
}


@pytest.mark.parametrize("output", [[], ["--json"]], ids=["tables", "json"])
@pytest.mark.parametrize("case", list(CASES))
def test_bad_run_folder_is_one_line_and_nothing_on_stdout(trained, tmp_path, capsys, case, output):
    make, message = CASES[case]
    code = main(["compare", str(trained), str(make(tmp_path, trained)), *output])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert captured.err.count("\n") == 1 and captured.err.startswith("error: ") and message in captured.err


def test_json_without_run_folders_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["compare", "--json"])
    assert stop.value.code == 2 and capsys.readouterr().out == ""


@pytest.mark.filterwarnings("ignore:Glyph 9")  # the chart's font has no tab character: matplotlib says so
@pytest.mark.parametrize(
    "name", ['a|b <img src=x onerror=alert(1)> "q"_seed7', "tab\there_seed7", "naïve – ünïcode_seed7"]
)
def test_odd_folder_names_stay_intact_in_json_and_harmless_in_the_tables(trained, tmp_path, capsys, name):
    run = tmp_path / name
    shutil.copytree(trained, run)
    assert main(["compare", str(run), "--json", "--html", str(tmp_path / "c.html")]) == 0
    data = json.loads(capsys.readouterr().out)
    (group,) = data["groups"]
    assert group["name"] == name.removesuffix("_seed7") and group["runs"][0]["path"] == str(run)
    html = (tmp_path / "c.html").read_text(encoding="utf-8")
    assert "<img src=x" not in html  # escaped on the page
    assert main(["compare", str(run)]) == 0
    lines = capsys.readouterr().out.splitlines()
    row = lines[lines.index("**Entity F1 (%), mean ± sample std (n − 1) over seeds**") + 4]
    cells = re.split(r"(?<!\\)\|", row)[1:-1]  # a "|" in the name is escaped: the row keeps its five cells
    assert len(cells) == 5 and cells[0].strip().replace("\\|", "|") == group["name"]


def test_report_and_compare_pages_write_through_special_files(
    trained, tmp_path, devices, fifo, fifo_reader, unblock, capsys
) -> None:
    """A FIFO with a reader, a character device and ``-`` get the page (before, a FIFO without a writer hung
    the check that reads an existing page's first bytes); nothing is renamed over them."""
    reader = fifo_reader(fifo)
    unblock(fifo, 60)  # a read of the FIFO (as the old check did) fails the test after a minute, never hangs
    assert main(["report", str(trained), "--output", str(fifo)]) == 0
    assert reader.bytes().lower().startswith(b"<!doctype html") and stat.S_ISFIFO(fifo.lstat().st_mode)
    assert main(["compare", str(trained), "--html", str(devices["null"])]) == 0
    assert stat.S_ISCHR(devices["null"].lstat().st_mode)
    capsys.readouterr()
    assert main(["report", str(trained), "--output", "-"]) == 0
    assert capsys.readouterr().out.lower().startswith("<!doctype html")
    assert (
        main(["compare", str(trained), "--html", "-"]) == 0
    )  # stdout holds the page alone, tables on stderr
    out, err = capsys.readouterr()
    assert out.lower().startswith("<!doctype html") and out.rstrip().endswith("</html>") and "| F1" not in out
    assert "|---" in err
    assert not (tmp_path / "-").exists()
