"""The annotation formats' registry (``text/annotations/registry.py``): every record is complete, each format
detects and reads back what its own writer wrote, every list of format names is the registry's, and a new
format is one record and one row."""

from __future__ import annotations

import argparse
import dataclasses
import typing
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from ner_app.config.schema import DataConfig
from ner_app.report import formats as output_formats
from ner_app.text.annotations import registry
from ner_app.text.annotations.convert import FORMATS, SPAN_FORMATS, convert_document
from ner_app.text.annotations.format import Format, Options
from ner_app.text.annotations.model import AnnotationFormatError, Audit, CharSpan, TextDocument
from ner_app.text.annotations.registry import detect_format, read_documents
from ner_app.text.annotations.resolve import Policy
from ner_app.text.annotations.splits import read_split, split_file, split_suffix
from ner_app.text.outputs import OutputFormat, Target
from ner_app.text.predictions import Entity, TaggedLine, TaggedSentence
from ner_app.text.tags import entities

Found = list[tuple[str, list[tuple[int, int, str]]]]  # (line, [(start, end, type)]) per line of text


def line(text: str, *found: tuple[str, str]) -> TaggedLine:
    """A record whose entities are found left to right by their text."""
    spans, at = [], 0
    for surface, kind in found:
        start = text.index(surface, at)
        spans.append(Entity(start, start + len(surface), kind, surface, 0.9))
        at = start + len(surface)
    return TaggedLine(text, tuple(spans))


LINES = [
    line("Angela Merkel visited Paris on Monday.", ("Angela Merkel", "PER"), ("Paris", "LOC")),
    line("Nothing here."),
    line(
        "Sony bought Columbia Pictures in Tokyo.",
        ("Sony", "ORG"),
        ("Columbia Pictures", "ORG"),
        ("Tokyo", "LOC"),
    ),
]
SENTENCES = [
    TaggedSentence(("EU", "rejects", "German", "call"), ("B-ORG", "O", "B-MISC", "O")),
    TaggedSentence(("Peter", "Blackburn", "in", "New", "York"), ("B-PER", "I-PER", "O", "B-LOC", "I-LOC")),
]
TARGET = Target(("LOC", "MISC", "ORG", "PER"), "news.txt", "test-model")
# A format whose tool takes no predictions (no writer) is checked on a file written here instead.
CONLLU = "".join(
    f"{i}\t{word}\t_\t_\t_\t_\t0\t_\t_\tNE={tag}\n"
    for i, (word, tag) in enumerate(zip(SENTENCES[1].rows, SENTENCES[1].tags, strict=True), start=1)
)
HANDWRITTEN = {"conllu": ("pre.conllu", CONLLU, SENTENCES[1:])}  # name, content, what it holds
DEFAULTS = Options(Policy({}, None))
LINES_FOUND: Found = [(r.text, [(e.start, e.end, e.type) for e in r.entities]) for r in LINES]


def written(fmt: Format, folder: Path) -> Path:
    """The predictions written in ``fmt`` by its own writer (its handwritten sample when it has none)."""
    if fmt.writer is None:
        name, content, _ = HANDWRITTEN[fmt.name]
        (folder / name).write_text(content, encoding="utf-8")
        return folder / name
    items: list[object] = [x for s in SENTENCES for x in (s, "")] if fmt.writer.reads == "conll" else LINES
    return output_formats.write_output(folder / f"pre{fmt.suffixes[0]}", fmt.writer, items, TARGET)


def by_line(path: Path, fmt: str, options: Options = DEFAULTS) -> Found:
    """What the conversion reads from ``path``: each document cut into its lines (a brat document is a block
    of lines), with the entities of each line at offsets relative to it."""
    audit = Audit()
    out: Found = []
    for doc in read_documents(fmt, path, options, audit):
        converted = convert_document(doc, options, audit)
        at = 0
        for part in converted.text.removesuffix("\n").split("\n"):
            spans = [(s - at, e - at, k) for s, e, k in converted.entities if at <= s < at + len(part) + 1]
            out.append((part, spans))
            at += len(part) + 1
    assert audit.changed == 0, audit.lines
    return out


def expected(fmt: Format) -> Found:
    """What was written: the lines and their entities, or the sentences' tokens joined by spaces."""
    if fmt.writer is not None and fmt.writer.reads == "text":
        return LINES_FOUND
    out: Found = []
    for sentence in SENTENCES if fmt.writer is not None else HANDWRITTEN[fmt.name][2]:
        starts = [sum(len(t) + 1 for t in sentence.rows[:i]) for i in range(len(sentence.rows) + 1)]
        found = entities(list(sentence.tags), "IOB2")
        out.append((" ".join(sentence.rows), [(starts[s], starts[e] - 1, kind) for kind, s, e in found]))
    return out


@pytest.mark.parametrize("name", list(registry.FORMATS))
def test_every_record_is_complete(name):
    fmt = registry.FORMATS[name]
    assert fmt.name == name and callable(fmt.read) and callable(fmt.detect) and fmt.clue
    assert fmt.suffixes and all(s == "" or s.startswith(".") for s in fmt.suffixes)
    assert set(fmt.options) <= {f.name for f in dataclasses.fields(Options)}
    assert fmt.writer is not None or name in HANDWRITTEN, (
        f"{name}: no writer, so a sample file is needed here"
    )
    if fmt.writer is not None:
        assert fmt.writer.name == name


def test_precedence_is_explicit():
    """Detection asks formats in the order of their precedence, never in the order of the rows."""
    precedences = [f.precedence for f in registry.FORMATS.values()]
    assert len(set(precedences)) == len(precedences)
    assert [f.name for f in registry.by_precedence()][0] == "brat"  # a folder: before any name or content
    assert [f.name for f in registry.by_precedence()][-1] == "conll"  # any two-column line: last


@pytest.mark.parametrize("name", list(registry.FORMATS))
def test_each_format_detects_and_reads_back_what_its_writer_wrote(tmp_path, monkeypatch, name):
    fmt = registry.FORMATS[name]
    path = written(fmt, tmp_path)
    assert detect_format(path) == name
    with monkeypatch.context() as m:  # precedence decides, not the order of the rows
        m.setattr(registry, "FORMATS", dict(reversed(registry.FORMATS.items())))
        assert detect_format(path) == name
    assert by_line(path, name) == expected(fmt)
    # what split_file looks for: the same file as a split, found without and with the format named
    split = tmp_path / "split"
    split.mkdir()
    path.rename(split / f"train{fmt.suffixes[0]}")
    assert (
        split_file(split, "train", None)
        == split_file(split, "train", name)
        == split / f"train{fmt.suffixes[0]}"
    )
    assert split_suffix(name) == (fmt.suffixes[0] or "/")


@pytest.mark.parametrize("name", list(registry.FORMATS))
def test_a_reader_reads_only_its_own_options(tmp_path, name):
    """``Format.options`` names what the reader reads: the options it does not name change nothing."""
    fmt = registry.FORMATS[name]
    path = written(fmt, tmp_path)
    others = {"tag_column": -2, "annotation": "latest"}
    changed = dataclasses.replace(DEFAULTS, **{k: v for k, v in others.items() if k not in fmt.options})
    assert by_line(path, name, changed) == by_line(path, name)


def test_names_everywhere_are_the_registrys():
    """convert --from, check-data --format, data.format and predict --format's tool formats: the registry."""
    from ner_app.cli.parser import build_parser

    names = tuple(registry.FORMATS)
    assert FORMATS == names
    assert SPAN_FORMATS == tuple(n for n, f in registry.FORMATS.items() if f.spans)
    literal, none = typing.get_args(typing.get_type_hints(DataConfig)["format"])
    assert typing.get_args(literal) == names and none is type(None)
    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))

    def choices(command: str, dest: str) -> tuple[str, ...]:
        action = next(a for a in commands.choices[command]._actions if a.dest == dest)
        return tuple(action.choices or ())

    assert choices("convert", "fmt") == names
    assert choices("check-data", "fmt") == names
    writers = {n: f.writer for n, f in registry.FORMATS.items() if f.writer is not None}
    assert {n for n, f in output_formats.FORMATS.items() if writers.get(n) is f} == set(writers)
    assert set(writers) <= set(choices("predict", "format"))


def test_a_jsonl_file_no_format_claims_is_named_with_what_each_looks_for(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text('{"text": "x", "tokens": []}\n', encoding="utf-8")
    with pytest.raises(AnnotationFormatError) as err:
        detect_format(path)
    assert str(err.value) == (
        f"{path}:1: cannot tell which JSONL format this is (expected 'entities', 'spans' or 'label'); "
        "name it with --from"
    )


# The recipe: a throwaway format, one document a line ``TEXT<TAB>START-END:TYPE ...``.
def read_toy(path: Path, options: Options, audit: Audit) -> Iterator[TextDocument]:
    for number, row in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        text, _, marks = row.partition("\t")
        spans = []
        for mark in marks.split():
            where, _, kind = mark.partition(":")
            start, _, end = where.partition("-")
            spans.append(CharSpan(int(start), int(end), kind, f"{path}:{number}"))
        yield TextDocument(f"{path}:{number}", text, spans)


def write_toy(records: Iterable[TaggedLine], target: Target) -> Iterator[str]:
    for r in records:
        yield r.text + "\t" + " ".join(f"{e.start}-{e.end}:{e.type}" for e in r.entities) + "\n"


TOY = Format(
    "toy",
    suffixes=(".toy",),
    detect=lambda probe: probe.path.suffix == ".toy",
    precedence=35,
    clue="the name NAME.toy",
    read=read_toy,
    spans=True,
    writer=OutputFormat("toy", "text", write_toy, "TEXT<TAB>START-END:TYPE per line"),
)


def test_a_new_format_is_one_record_and_one_row(tmp_path, monkeypatch):
    """With its row in ``FORMATS``, a format is detected, read and converted, and a split of it is found and
    read for training."""
    folder = tmp_path / "data"
    folder.mkdir()
    assert TOY.writer is not None
    path = output_formats.write_output(folder / "train.toy", TOY.writer, LINES, TARGET)
    assert detect_format(path) == "conll"  # without its row: a line of two words looks like CoNLL
    assert split_file(folder, "train", None) is None

    monkeypatch.setitem(registry.FORMATS, "toy", TOY)
    assert detect_format(path) == "toy"
    assert by_line(path, "toy") == LINES_FOUND
    assert split_file(folder, "train", None) == path and split_suffix("toy") == ".toy"
    sentences = read_split(path, None)
    assert [s.tags for s in sentences][0] == ["B-PER", "I-PER", "O", "B-LOC", "O", "O", "O"]
    assert "toy" in registry.span_formats()
