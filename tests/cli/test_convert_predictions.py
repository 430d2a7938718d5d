"""``predict``'s JSONL, read back by ``convert --from jsonl``: the same entities, so predictions can be
corrected in an annotation tool or trained on (the shipped CoNLL-2003 tagger, a real run of predict)."""

from __future__ import annotations

import json

from ner_app.cli.commands import main
from ner_app.text.conll import read_conll
from ner_app.text.tags import entities
from ner_app.text.tokenizer import tokenize

LINES = [
    "Angela Merkel visited Paris on Monday.",
    "Sony bought Columbia Pictures in 1989. Alice Smith lives in New York.",
    "",
    "The U.S. Army said so, according to Reuters.",
]


def test_predictions_convert_back_to_the_same_entities(tmp_path, capsys):
    raw = tmp_path / "news.txt"
    raw.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    assert main(["predict", "--input", str(raw), "--threads", "1"]) == 0
    predicted = tmp_path / "predicted.jsonl"
    predicted.write_text(capsys.readouterr().out, encoding="utf-8")
    records = [json.loads(line) for line in predicted.read_text(encoding="utf-8").splitlines()]
    want = [[(e["start"], e["end"], e["type"]) for e in r["entities"]] for r in records]
    assert sum(map(len, want)) >= 6  # the tagger found the names: the comparison says something

    back = tmp_path / "back.jsonl"
    assert main(["convert", str(predicted), "--output", str(back), "--strict"]) == 0
    again = [json.loads(line) for line in back.read_text(encoding="utf-8").splitlines()]
    assert [r["text"] for r in again] == LINES
    assert [[(e["start"], e["end"], e["type"]) for e in r["entities"]] for r in again] == want

    conll = tmp_path / "back.conll"
    assert main(["convert", str(predicted), "--output", str(conll), "--strict"]) == 0
    tags: dict[int, list[str]] = {}  # each document's tags, its sentences joined
    for sentence in read_conll(conll):
        tags.setdefault(sentence.doc, []).extend(sentence.tags)
    for doc, (line, spans) in enumerate(zip(LINES, want, strict=True)):
        starts = {t.start: i for i, t in enumerate(tokenize(line))}
        ends = {t.end: i + 1 for i, t in enumerate(tokenize(line))}
        assert entities(tags.get(doc, []), "IOB2") == [(kind, starts[s], ends[e]) for s, e, kind in spans]
