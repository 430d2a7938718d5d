"""The aligner and the resolver: a brute-force oracle over random spans, overlaps, sentences, and the audit
naming every changed span by FILE:LINE."""

from __future__ import annotations

import json
import random

import pytest

from ner_app.cli.commands import main
from ner_app.text.annotations.align import align
from ner_app.text.annotations.model import AnnotationFormatError, Audit, CharSpan, TextDocument, TokenSpan
from ner_app.text.annotations.resolve import Policy, keep_spans, sentence_ranges
from ner_app.text.conll import read_conll
from ner_app.text.tokenizer import tokenize

TEXT = (
    "Dr. Jane O'Neill (UN) met Sonys' CEO in São Paulo, Brazil -- at 10:30 on 1996-08-22!  Then U.S. talks."
)


def oracle(text: str, start: int, end: int, mode: str) -> tuple[int, int] | None:
    """The token range of a span by definition, one token at a time (None: dropped)."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    tokens = tokenize(text)
    touched = [i for i, t in enumerate(tokens) if t.start < end and start < t.end]
    inside = [i for i in touched if start <= tokens[i].start and tokens[i].end <= end]
    if not touched:
        return None
    exact = tokens[touched[0]].start == start and tokens[touched[-1]].end == end
    if exact or mode == "expand":
        return touched[0], touched[-1] + 1
    if mode == "contract" and inside:
        return inside[0], inside[-1] + 1
    return None


@pytest.mark.parametrize("mode", ["expand", "contract", "strict"])
def test_alignment_matches_the_brute_force_oracle(mode):
    rng = random.Random(7)
    spans = []
    for k in range(400):
        start = rng.randrange(len(TEXT))
        spans.append(
            CharSpan(start, rng.randrange(start + 1, min(len(TEXT), start + 25) + 1), "X", f"f:{k + 1}")
        )
    audit = Audit()
    doc = align(TextDocument("f", TEXT, spans), mode, audit)
    got = {int(s.where[2:]): (s.start, s.end) for s in doc.spans}
    changed = set()
    for k, span in enumerate(spans, start=1):
        want = oracle(TEXT, span.start, span.end, mode)
        assert got.get(k) == want, (TEXT[span.start : span.end], mode)
        tokens = tokenize(TEXT)
        if want is None or (tokens[want[0]].start, tokens[want[1] - 1].end) != (
            span.start + len(TEXT[span.start : span.end]) - len(TEXT[span.start : span.end].lstrip()),
            span.end - len(TEXT[span.start : span.end]) + len(TEXT[span.start : span.end].rstrip()),
        ):
            changed.add(k)
    # every span that is not exactly its tokens (after trimming) has one audit line naming it, no other does
    named = {int(line.split(":")[1]) for line in audit.lines}
    assert named == changed and len(audit.lines) == len(changed) == audit.changed


def test_whitespace_at_edges_is_trimmed_not_reported():
    audit = Audit()
    text = "Hello  Sony Music \n today"
    doc = align(TextDocument("f", text, [CharSpan(5, 19, "ORG", "f:1")]), "strict", audit)
    assert [(s.start, s.end) for s in doc.spans] == [(1, 3)]
    assert audit.lines == [] and audit.counts["spans trimmed of whitespace at their edges"] == 1


def test_a_span_of_whitespace_only_is_dropped():
    audit = Audit()
    doc = align(TextDocument("f", "a   b", [CharSpan(1, 4, "X", "f:3")]), "expand", audit)
    assert doc.spans == [] and audit.lines == ["f:3: dropped '   ' (X): no token in it"]


def _doc(*spans: tuple[int, int, str]):
    audit = Audit()
    doc = align(TextDocument("f", "New York City Council met in New York today", []), "expand", audit)
    doc.spans = [TokenSpan(s, e, t, f"f:{k + 1}") for k, (s, e, t) in enumerate(spans)]
    return doc


def test_overlaps_longest_first_and_error():
    spans = [(0, 2, "LOC"), (0, 4, "ORG"), (2, 3, "LOC"), (6, 8, "LOC"), (6, 8, "LOC")]
    audit = Audit()
    kept = keep_spans(_doc(*spans), Policy({}, None, "longest"), audit)
    assert [(s.start, s.end, s.type) for s in kept] == [(0, 4, "ORG"), (6, 8, "LOC")]
    assert audit.lines == [
        "f:1: dropped 'New York' (LOC): overlaps 'New York City Council' (ORG, f:2), kept (--overlap longest)",
        "f:3: dropped 'City' (LOC): overlaps 'New York City Council' (ORG, f:2), kept (--overlap longest)",
    ]
    assert audit.counts["identical spans merged"] == 1
    kept = keep_spans(_doc(*spans), Policy({}, None, "first"), Audit())
    assert [(s.start, s.end, s.type) for s in kept] == [(0, 2, "LOC"), (2, 3, "LOC"), (6, 8, "LOC")]
    with pytest.raises(
        AnnotationFormatError, match=r"^f:2: 'New York City Council' \(ORG\) overlaps 'New York'"
    ):
        keep_spans(_doc(*spans), Policy({}, None, "error"), Audit())


def test_label_map_then_whitelist():
    audit = Audit()
    policy = Policy({"LOC": "GPE", "New Type": "NEW"}, frozenset({"GPE", "NEW"}), "longest")
    kept = keep_spans(_doc((0, 2, "LOC"), (2, 4, "ORG"), (6, 8, "New Type")), policy, audit)
    assert [(s.type, s.start) for s in kept] == [("GPE", 0), ("NEW", 6)]
    assert audit.lines == ["f:2: left out 'City Council' (ORG): its type is not among --types"]
    assert audit.changed == 0  # what the user asked for: --strict does not stop on it
    with pytest.raises(AnnotationFormatError, match="^f:1: label 'New Type' is not an entity type"):
        keep_spans(_doc((0, 2, "New Type")), Policy({}, None), Audit())


def test_no_sentence_boundary_inside_an_entity():
    """The splitter ends a sentence after 'Yahoo!' before a capital; the entity 'Yahoo! Inc.' keeps it whole."""
    doc = align(TextDocument("f", "Shares of Yahoo! Inc. rose. Then fell.", []), "expand", Audit())
    assert len(doc.sentences) == 3
    merged = sentence_ranges(doc, [TokenSpan(2, 5, "ORG", "f:1")])
    assert [doc.tokens[a:b] for a, b in merged] == [
        ["Shares", "of", "Yahoo", "!", "Inc.", "rose", "."],
        ["Then", "fell", "."],
    ]


def test_the_audit_names_every_misaligned_span_by_file_and_line(tmp_path, capsys):
    path = tmp_path / "export.jsonl"
    records = [
        {"text": "Sony is here.", "label": [[0, 4, "ORG"]]},  # aligned
        {"text": "The Sonys of Germany.", "label": [[4, 8, "ORG"], [13, 17, "LOC"], [13, 20, "LOC"]]},
        {"text": "nothing", "label": []},
        {"text": "Paris and Rome", "label": [[0, 3, "LOC"], [10, 14, "LOC"]]},
    ]
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    out = tmp_path / "out.conll"
    assert main(["convert", str(path), "--from", "doccano", "--output", str(out), "--align", "contract"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:-1] == [
        f"{path}:2: dropped 'Sony' (ORG): an edge inside the tokens 'Sonys', none of them wholly in it (--align contract)",
        f"{path}:2: dropped 'Germ' (LOC): an edge inside the tokens 'Germany', none of them wholly in it (--align contract)",
        f"{path}:4: dropped 'Par' (LOC): an edge inside the tokens 'Paris', none of them wholly in it (--align contract)",
    ]
    assert lines[-1] == (
        f"4 documents, 4 sentences, 13 tokens, 3 entities; spans moved 0, cut 0, dropped 3; written to {out}"
    )
    tags = [s.tags for s in read_conll(out)]
    assert tags == [["B-ORG", "O", "O", "O"], ["O", "O", "O", "B-LOC", "O"], ["O"], ["O", "O", "B-LOC"]]
    # --strict: the same spans, exit 2, nothing written
    out.unlink()
    assert main(["convert", str(path), "--output", str(out), "--align", "contract", "--strict"]) == 2
    captured = capsys.readouterr()
    assert captured.out.count(f"{path}:") == 3 and not out.exists()
    assert captured.err.strip() == (
        f"error: 3 spans were moved, cut or dropped (listed above) and --strict is set; nothing written to {out}"
    )
