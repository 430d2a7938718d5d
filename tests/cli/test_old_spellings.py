"""One option vocabulary: ``--gold`` is the gold file of every command that reads one, ``--json`` prints JSON
and ``--output`` names a file. The former spellings (``evaluate --input``, ``find-threshold --input``,
``calibrate --dev``, ``bilm-perplexity --json FILE``) still work, give the same result, and print one note on
stderr naming the new spelling."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ner_app.cli.main import main
from tests.helpers import REPO, TINY, tiny_overrides, train_args, write_grammar

pytestmark = pytest.mark.system  # trains a tiny tagger

GOLD = str(TINY / "valid.txt")


@pytest.fixture(scope="module")
def export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("spellings") / "run"
    assert main(["train", *train_args(run, "trainer.max_epochs=6")]) == 0  # unsure, but it finds entities
    return run / "export"


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def _notes(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("note:")]


@pytest.mark.parametrize(("command", "old"), [("evaluate", "--input"), ("find-threshold", "--input")])
def test_gold_and_its_old_spelling_give_the_same_json(
    export: Path, capsys: pytest.CaptureFixture[str], command: str, old: str
) -> None:
    code, new_out, new_err = _run(capsys, command, "--model", str(export), "--gold", GOLD, "--json")
    assert code == 0 and _notes(new_err) == []
    code, old_out, old_err = _run(capsys, command, "--model", str(export), old, GOLD, "--json")
    assert code == 0 and json.loads(old_out) == json.loads(new_out)
    assert _notes(old_err) == [f"note: {command} {old} is now --gold; the old name still works"]


@pytest.mark.parametrize(("command", "old"), [("evaluate", "--input"), ("find-threshold", "--input")])
def test_errors_name_the_spelling_used(
    export: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, old: str
) -> None:
    for option in ("--gold", old):
        code, _, err = _run(capsys, command, "--model", str(export), option, str(tmp_path))
        assert code == 2
        assert (
            f"error: {option} {tmp_path}: not a file (expected a gold file: CoNLL, an annotation export or a brat folder)"
            in err
        )


def test_calibrate_gold_and_dev(export: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = {}
    for option in ("--gold", "--dev"):
        out = tmp_path / option.strip("-")
        code, printed, err = _run(
            capsys, "calibrate", "--model", str(export), option, GOLD, "--output", str(out)
        )
        assert code == 0 and (out / "tagger.json").is_file(), err
        # the fitting time differs from run to run; the temperature, ECE and log loss do not
        results[option] = re.sub(r"\(fitted in [0-9.]+ s\)", "", printed)
        expected = (
            ["note: calibrate --dev is now --gold; the old name still works"] if option == "--dev" else []
        )
        assert _notes(err) == expected
    assert results["--gold"] == results["--dev"] and "temperature" in results["--gold"]
    code, _, err = _run(
        capsys,
        "calibrate",
        "--model",
        str(export),
        "--dev",
        str(tmp_path / "none.conll"),
        "--output",
        str(tmp_path / "x"),
    )
    assert code == 2 and f"error: --dev {tmp_path / 'none.conll'}: not found" in err


def test_a_gold_file_is_required(export: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["evaluate", "--model", str(export)])
    assert stop.value.code == 2 and "one of the arguments --gold is required" in capsys.readouterr().err


def test_bilm_perplexity_json_prints_and_output_writes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = write_grammar(tmp_path / "train.txt", 200, seed=0)
    heldout = write_grammar(tmp_path / "heldout.txt", 20, seed=1)
    overrides = tiny_overrides(tmp_path, corpus, [heldout], steps=2)
    config = str(REPO / "configs" / "bilm_tiny.yaml")
    assert main(["pretrain-bilm", "--config", config, "--threads", "1", *overrides]) == 0
    args = ["bilm-perplexity", str(tmp_path / "run"), "--heldout", str(heldout), "--threads", "1"]

    code, table, err = _run(capsys, *args, "--output", str(tmp_path / "new.json"))
    assert code == 0 and "| held-out file |" in table and _notes(err) == []
    written = json.loads((tmp_path / "new.json").read_text())
    assert set(written["heldout.txt"]["contexts"]) == {"sentence", "document"}

    code, printed, err = _run(capsys, *args, "--json")
    assert code == 0 and json.loads(printed) == written and "| held-out file |" not in printed + err

    code, printed, err = _run(capsys, *args, "--output", "-")  # standard output holds the JSON alone
    assert code == 0 and json.loads(printed) == written and "| held-out file |" in err

    code, table, err = _run(capsys, *args, "--json", str(tmp_path / "old.json"))  # the former spelling
    assert code == 0 and "| held-out file |" in table
    assert (tmp_path / "old.json").read_text() == (tmp_path / "new.json").read_text()
    assert _notes(err) == [
        "note: bilm-perplexity --json FILE is now --output FILE (--json prints the JSON); the old form still works"
    ]
