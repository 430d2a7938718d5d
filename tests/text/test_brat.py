"""brat as brat counts: offsets over text read with universal newlines (a CRLF ``.txt`` counts ``\\r\\n`` as one
character), event triggers and other non-entity text-bound annotations skipped and counted, and
``annotation.conf``'s ``[entities]`` section deciding which types are entities. The files are written here as
brat keeps them (https://brat.nlplab.org/standoff.html, https://brat.nlplab.org/configuration.html)."""

from __future__ import annotations

from pathlib import Path

from ner_app.cli.commands import main
from ner_app.text.annotations.brat import read_brat
from ner_app.text.annotations.model import Audit

# Two lines, five entities, two of them on the second line: brat's offsets count the line break once.
LINES = ["Angela Merkel met Emmanuel Macron in Paris.", "Sony bought Columbia Pictures."]
FOUND = [("Angela Merkel", "PER"), ("Emmanuel Macron", "PER"), ("Paris", "LOC"), ("Sony", "ORG")]
FOUND += [("Columbia Pictures", "ORG")]


def brat_offsets(text: str) -> list[tuple[int, int, str, str]]:
    """``(start, end, type, surface)`` of FOUND in ``text`` (the text as brat reads it: ``\\n`` line ends)."""
    spans, at = [], 0
    for surface, kind in FOUND:
        start = text.index(surface, at)
        spans.append((start, start + len(surface), kind, surface))
        at = start + len(surface)
    return spans


def write_pair(folder: Path, name: str, newline: str, extra: tuple[str, ...] = ()) -> Path:
    """``name.txt`` with ``newline`` line ends and ``name.ann`` with offsets counted as brat counts them."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.txt").write_bytes((newline.join(LINES) + newline).encode("utf-8"))
    as_brat_reads = "\n".join(LINES) + "\n"
    rows = [
        f"T{k}\t{kind} {s} {e}\t{surface}"
        for k, (s, e, kind, surface) in enumerate(brat_offsets(as_brat_reads), 1)
    ]
    (folder / f"{name}.ann").write_bytes(("\n".join([*rows, *extra]) + "\n").encode("utf-8"))
    return folder / f"{name}.ann"


def spans_read(path: Path) -> tuple[list[tuple[str, str]], Audit]:
    audit = Audit()
    found = [(d.text[s.start : s.end], s.type) for d in read_brat(path, audit) for s in d.spans]
    return found, audit


def test_a_crlf_text_keeps_every_span(tmp_path):
    for newline in ("\r\n", "\r", "\n"):  # Windows, old Mac, Unix: brat reads all three as one \n
        ann = write_pair(tmp_path / repr(newline), "doc", newline)
        found, audit = spans_read(ann)
        assert found == FOUND, newline
        assert audit.changed == 0 and not audit.lines


def test_a_crlf_ann_file_is_read_line_by_line(tmp_path):
    ann = write_pair(tmp_path, "doc", "\r\n")
    ann.write_bytes(ann.read_bytes().replace(b"\n", b"\r\n"))  # the .ann saved by a Windows editor too
    assert spans_read(ann)[0] == FOUND


def test_convert_of_a_crlf_folder_drops_nothing(tmp_path, capsys):
    write_pair(tmp_path / "ann", "doc", "\r\n")
    out = tmp_path / "out.conll"
    assert main(["convert", str(tmp_path / "ann"), "--from", "brat", "--output", str(out), "--strict"]) == 0
    summary = capsys.readouterr().out.splitlines()[-1]
    assert "5 entities; spans moved 0, cut 0, dropped 0" in summary


def test_event_triggers_are_not_entities(tmp_path, capsys):
    text = "\n".join(LINES) + "\n"
    met = text.index("met")
    bought = text.index("bought")
    extra = (
        f"T6\tMeet {met} {met + 3}\tmet",
        "E1\tMeet:T6 Arg1:T1 Arg2:T2",
        f"T7\tMeet {bought} {bought + 6}\tbought",  # no event names it, but its type is a trigger's
        "A1\tNegation E1",
        "R1\tLocated Arg1:T1 Arg2:T3",
    )
    ann = write_pair(tmp_path / "ann", "doc", "\n", extra)
    found, audit = spans_read(ann)
    assert found == FOUND
    assert audit.counts["brat event triggers skipped (not entities)"] == 2
    assert audit.counts["brat relations, events, attributes and notes skipped"] == 3

    out = tmp_path / "out.conll"
    assert main(["convert", str(tmp_path / "ann"), "--from", "brat", "--output", str(out)]) == 0
    summary = capsys.readouterr().out.splitlines()[-1]
    assert "5 entities" in summary and "2 brat event triggers skipped (not entities)" in summary
    assert "Meet" not in out.read_text(encoding="utf-8")


def test_annotation_conf_entities_decide(tmp_path):
    text = "\n".join(LINES) + "\n"
    year = text.index("Sony")
    extra = (f"T6\tCompany_name {year} {year + 4}\tSony",)  # a type the configuration lists elsewhere
    collection = tmp_path / "collection"
    write_pair(collection / "part", "doc", "\n", extra)
    (collection / "annotation.conf").write_text(  # in a folder above the documents, as brat looks it up
        "# the entity types\n"
        "[entities]\n"
        "!Named\n"  # a type that only groups others: its children are indented under it
        "\tPER\n"
        "\tLOC\n"
        "-----\n"
        "ORG\n"
        "\n"
        "[relations]\n"
        "Located\tArg1:PER, Arg2:LOC\n"
        "<OVERLAP>\tArg1:<ENTITY>, Arg2:<ENTITY>, <OVL-TYPE>:<ANY>\n"
        "[events]\n"
        "Company_name\tTheme:ORG\n"
        "[attributes]\n"
        "Negation\tArg:<EVENT>\n",
        encoding="utf-8",
    )
    found, audit = spans_read(collection)
    assert found == FOUND
    assert audit.counts["brat text-bound annotations skipped (type not in annotation.conf [entities])"] == 1


def test_annotation_conf_of_other_types_keeps_none_of_them(tmp_path):
    ann = write_pair(tmp_path, "doc", "\n")
    (tmp_path / "annotation.conf").write_text("[entities]\nPerson\n[relations]\n[events]\n[attributes]\n")
    found, audit = spans_read(ann)
    assert found == []
    assert audit.counts["brat text-bound annotations skipped (type not in annotation.conf [entities])"] == 5


def test_predict_brat_of_crlf_lines_counts_as_brat_does(tmp_path):
    """Lines of a CRLF input end in \\r: the folder's .txt is the text as brat reads it and every offset
    points there, so brat (and convert --from brat) shows each entity where it was found."""
    from ner_app.report.formats import FORMATS, Target, write_output
    from ner_app.text.predictions import Entity, TaggedLine

    records = []
    for line in LINES:  # each line as predict reads a CRLF file: split on \n, its \r kept
        found = [Entity(line.index(f), line.index(f) + len(f), k, f, 0.9) for f, k in FOUND if f in line]
        records.append(TaggedLine(line + "\r", tuple(found)))
    folder = write_output(tmp_path / "brat", FORMATS["brat"], records, Target(("LOC", "ORG", "PER")))
    assert (folder / "doc000001.txt").read_bytes() == ("\n".join(LINES) + "\n").encode()
    assert spans_read(folder)[0] == FOUND
