"""Every command that reads gold (evaluate, find-threshold, calibrate) reads every format through the reader
training uses: the tiny run's dev file as a Label Studio, doccano or brat export (written here from each tool's
layout) gives the scores the CoNLL file gives."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ner_app.cli.commands import main
from ner_app.text.conll import read_conll
from ner_app.text.tags import entities
from tests.text.test_split import Doc, write_format

TINY = Path(__file__).resolve().parents[2] / "tests" / "data" / "tiny_conll"


def dev_documents() -> list[Doc]:
    """The tiny dev file's documents as raw text (tokens joined by spaces, sentences by newlines) and spans."""
    sentences = read_conll(TINY / "valid.txt")
    docs: list[Doc] = []
    for n in sorted({s.doc for s in sentences}):
        text, spans = "", []
        for s in (s for s in sentences if s.doc == n):
            text += "\n" if text else ""
            starts = []
            for token in s.tokens:
                starts.append(len(text))
                text += token + " "
            text = text[:-1]
            for kind, start, end in entities(s.tags, "IOB1"):
                spans.append((starts[start], starts[end - 1] + len(s.tokens[end - 1]), kind))
        docs.append((text, spans))
    return docs


def _json(capsys: pytest.CaptureFixture[str], args: list[str]) -> dict:
    assert main(args) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("fmt", ["labelstudio", "doccano", "brat"])
def test_a_gold_export_scores_as_its_conll(
    tiny_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    export = str(tiny_run / "export")
    gold = write_format(fmt, dev_documents(), tmp_path)
    conll = str(TINY / "valid.txt")
    for command in ("evaluate", "find-threshold"):
        base = [command, "--model", export, "--json"]
        want = _json(capsys, [*base, "--gold", conll])
        got = _json(capsys, [*base, "--gold", str(gold)])
        named = _json(capsys, [*base, "--gold", str(gold), "--from", fmt])
        assert want["sentences"] == 5 and 0 < want["f1" if command == "evaluate" else "gold_entities"] < 100
        # the same sentences, entities and scores; only the name of the file (and IOB1 -> IOB2) differ
        for found in (got, named):
            assert found["file"] == str(gold) and found["scheme"] == "IOB2" and want["scheme"] == "IOB1"
            assert {k: v for k, v in found.items() if k not in ("file", "scheme")} == {
                k: v for k, v in want.items() if k not in ("file", "scheme")
            }, command
    outputs = {}
    for name, source in (("conll", conll), (fmt, str(gold))):
        out = tmp_path / f"calibrated_{name}"
        assert main(["calibrate", "--model", export, "--gold", source, "--output", str(out)]) == 0
        # after the file's name, without the seconds the fit took
        outputs[name] = re.sub(r"fitted in [0-9.]+ s", "", capsys.readouterr().out.split(":", 1)[1])
    assert "temperature" in outputs["conll"] and outputs[fmt] == outputs["conll"]
