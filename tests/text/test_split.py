"""``ner-app split``: one export into train, dev and test. The inputs are written here from each tool's public
layout (not by the program); the splits are read back with the CoNLL reader."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pytest

from ner_app.cli.commands import main
from ner_app.text.conll import read_conll
from ner_app.text.tags import entities

NAMES = [("Alice Smith", "PER"), ("Bob", "PER"), ("Paris", "LOC"), ("Acme Corp", "ORG"), ("Berlin", "LOC")]
Doc = tuple[str, list[tuple[int, int, str]]]  # text, (start, end, type) character spans


def corpus(n: int = 40, rare: dict[str, tuple[int, ...]] | None = None) -> list[Doc]:
    """``n`` one-sentence documents of distinct text, two common entities each; a type of ``rare`` in the
    documents it lists."""
    rng = random.Random(0)
    docs: list[Doc] = []
    for i in range(n):
        picks = rng.sample(NAMES, 2) + [(f"Thing{t}", t) for t, where in (rare or {}).items() if i in where]
        text, spans = f"On day{i}", []
        for k, (name, kind) in enumerate(picks):
            text += " and " if k else " "
            spans.append((len(text), len(text) + len(name), kind))
            text += name
        docs.append((text + " met .", spans))
    return docs


def conll_lines(docs: list[Doc]) -> str:
    """CoNLL (IOB2), one -DOCSTART- document a document; tokens are the text's words."""
    out = []
    for text, spans in docs:
        out += ["-DOCSTART- O", ""]
        at = 0
        for word in text.split(" "):
            start = text.index(word, at)
            at = start + len(word)
            kind = next(((s, k) for s, e, k in spans if s <= start < e), None)
            out.append(f"{word} {'O' if kind is None else ('B-' if kind[0] == start else 'I-') + kind[1]}")
        out.append("")
    return "\n".join(out) + "\n"


def write_format(fmt: str, docs: list[Doc], folder: Path) -> Path:
    """``docs`` in ``fmt``, as the tool exports them."""
    if fmt == "conll":
        path = folder / "all.conll"
        path.write_text(conll_lines(docs), encoding="utf-8")
    elif fmt == "labelstudio":
        path = folder / "export.json"
        tasks = [
            {
                "id": i + 1,
                "data": {"text": text},
                "annotations": [
                    {
                        "id": 100 + i,
                        "was_cancelled": False,
                        "result": [
                            {
                                "id": f"r{i}_{k}",
                                "from_name": "label",
                                "to_name": "text",
                                "type": "labels",
                                "value": {"start": s, "end": e, "text": text[s:e], "labels": [kind]},
                            }
                            for k, (s, e, kind) in enumerate(spans)
                        ],
                    }
                ],
            }
            for i, (text, spans) in enumerate(docs)
        ]
        path.write_text(json.dumps(tasks), encoding="utf-8")
    elif fmt == "conllu":
        path = folder / "all.conllu"
        lines = []
        for i, (text, spans) in enumerate(docs):
            lines.append(f"# newdoc id = d{i}")
            rows = [line.split() for line in conll_lines([(text, spans)]).split("\n")[2:] if line]
            for k, (token, tag) in enumerate(rows, start=1):
                misc = "_" if tag == "O" else f"NE={tag}"
                lines.append(f"{k}\t{token}\t{token.lower()}\tX\t_\t_\t0\tdep\t_\t{misc}")
            lines.append("")
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    elif fmt == "brat":
        path = folder / "brat"
        path.mkdir()
        for i, (text, spans) in enumerate(docs):
            (path / f"doc{i:03}.txt").write_text(text, encoding="utf-8")
            ann = [f"T{k + 1}\t{kind} {s} {e}\t{text[s:e]}" for k, (s, e, kind) in enumerate(spans)]
            (path / f"doc{i:03}.ann").write_text("\n".join(ann) + "\n", encoding="utf-8")
    else:
        path = folder / f"{fmt}.jsonl"
        records = {
            "doccano": lambda t, sp: {"text": t, "label": [list(s) for s in sp]},
            "prodigy": lambda t, sp: {
                "text": t,
                "answer": "accept",
                "spans": [{"start": s, "end": e, "label": k} for s, e, k in sp],
            },
            "jsonl": lambda t, sp: {
                "text": t,
                "entities": [{"start": s, "end": e, "type": k, "text": t[s:e]} for s, e, k in sp],
            },
        }[fmt]
        path.write_text("".join(json.dumps(records(t, sp)) + "\n" for t, sp in docs), encoding="utf-8")
    return path


def split(path: Path, out: Path, *extra: str) -> int:
    return main(["split", str(path), "--output", str(out), *extra])


def documents(folder: Path) -> dict[str, list[tuple[tuple[str, str], ...]]]:
    """Each split's documents, each as its (token, tag) pairs."""
    found = {}
    for name in ("train", "valid", "test"):
        docs: dict[int, list[tuple[str, str]]] = {}
        for s in read_conll(folder / f"{name}.txt"):
            docs.setdefault(s.doc, []).extend(zip(s.tokens, s.tags, strict=True))
        found[name] = [tuple(d) for d in docs.values()]
    return found


@pytest.mark.parametrize("fmt", ["labelstudio", "doccano", "prodigy", "brat", "jsonl", "conllu"])
def test_every_format_splits_as_its_conll_does(tmp_path: Path, fmt: str) -> None:
    docs = corpus(rare={"PROD": (3, 11, 25)})
    assert split(write_format("conll", docs, tmp_path), tmp_path / "from_conll", "--seed", "5") == 0
    assert split(write_format(fmt, docs, tmp_path), tmp_path / "out", "--seed", "5") == 0
    for name in ("train.txt", "valid.txt", "test.txt"):
        assert (tmp_path / "out" / name).read_text() == (tmp_path / "from_conll" / name).read_text(), name


def test_same_seed_same_split_and_the_union_is_the_input(tmp_path: Path) -> None:
    source = tmp_path / "all.txt"
    # documents of several sentences, tags IOB1 (kept as in the file)
    rng = random.Random(1)
    lines = []
    for d in range(30):
        lines += ["-DOCSTART- -X- O", ""]
        for s in range(rng.randint(1, 4)):
            lines += [f"w{d}x{s} O", f"Name{d} I-{rng.choice(['PER', 'ORG'])}", "end O", ""]
    source.write_text("\n".join(lines) + "\n")
    assert split(source, tmp_path / "a", "--seed", "7") == 0
    assert split(source, tmp_path / "b", "--seed", "7") == 0
    assert split(source, tmp_path / "c", "--seed", "8") == 0
    files = ("train.txt", "valid.txt", "test.txt", "split.json")
    assert all((tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes() for f in files)
    assert any((tmp_path / "a" / f).read_bytes() != (tmp_path / "c" / f).read_bytes() for f in files)
    given: dict[int, list[tuple[str, str]]] = {}
    for s in read_conll(source):
        given.setdefault(s.doc, []).extend(zip(s.tokens, s.tags, strict=True))
    written = documents(tmp_path / "a")
    # every document whole, in exactly one split, tags as in the input
    assert Counter(d for docs in written.values() for d in docs) == Counter(tuple(d) for d in given.values())
    assert all(written.values())
    report = json.loads((tmp_path / "a" / "split.json").read_text())
    assert [report["splits"][n]["units"] for n in ("train", "dev", "test")] == [
        len(written[n]) for n in ("train", "valid", "test")
    ]


def test_identical_texts_land_in_one_split(tmp_path: Path) -> None:
    docs = corpus(30)
    docs[20] = docs[21] = docs[22] = docs[3]  # one text exported four times
    assert split(write_format("doccano", docs, tmp_path), tmp_path / "out") == 0
    words = tuple(docs[3][0].split(" "))
    holding = [
        n
        for n, found in documents(tmp_path / "out").items()
        for d in found
        if tuple(t for t, _ in d) == words
    ]
    assert len(holding) == 4 and len(set(holding)) == 1, holding


def test_a_rare_type_reaches_dev_and_test(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """PROD in 3 of 60 documents: one in each split; EVT in 2: train and test; ONE in 1: train."""
    docs = corpus(60, rare={"PROD": (4, 40, 41), "EVT": (10, 50), "ONE": (33,)})
    path = write_format("jsonl", docs, tmp_path)
    for seed in ("1", "2", "3"):
        out = tmp_path / f"out{seed}"
        assert split(path, out, "--seed", seed, "--json") == 0
        report = json.loads(capsys.readouterr().out)
        types = {n: report["splits"][n]["entities"] for n in ("train", "dev", "test")}
        assert [types[n].get("PROD", 0) for n in ("train", "dev", "test")] == [1, 1, 1]
        assert [types[n].get("EVT", 0) for n in ("train", "dev", "test")] == [1, 0, 1]
        assert [types[n].get("ONE", 0) for n in ("train", "dev", "test")] == [1, 0, 0]
        sentences = [report["splits"][n]["sentences"] for n in ("train", "dev", "test")]
        assert sentences[0] >= 44 and 4 <= sentences[1] <= 8 and 4 <= sentences[2] <= 8, sentences
        counted = Counter(k for s in read_conll(out / "test.txt") for k, _, _ in entities(s.tags, "IOB2"))
        assert counted == Counter(types["test"])  # the report counts what the file holds


def test_by_sentence_splits_a_single_document(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "one.txt"
    source.write_text("".join(f"w{i} O\nName{i} B-PER\n\n" for i in range(20)))
    assert split(source, tmp_path / "out", "--by", "sentence") == 0
    out = capsys.readouterr().out
    assert "sentences" in out and "written to" in out
    sentences = {n: read_conll(tmp_path / "out" / f"{n}.txt") for n in ("train", "valid", "test")}
    assert sorted(s.tokens[0] for found in sentences.values() for s in found) == sorted(
        f"w{i}" for i in range(20)
    )
    assert [len(sentences[n]) for n in ("train", "valid", "test")] == [16, 2, 2]


def test_a_second_run_replaces_its_own_output(tmp_path: Path) -> None:
    path = write_format("conll", corpus(), tmp_path)
    assert split(path, tmp_path / "out", "--seed", "1") == 0
    first = (tmp_path / "out" / "test.txt").read_text()
    assert split(path, tmp_path / "out", "--seed", "2", "--dev", "0.2") == 0
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        ".ner-app",  # the marker of its own output (docs/reliability.md#the-output-policy)
        "split.json",
        "test.txt",
        "train.txt",
        "valid.txt",
    ]
    assert json.loads((tmp_path / "out" / "split.json").read_text())["shares"] == {"dev": 0.2, "test": 0.1}
    assert (tmp_path / "out" / "test.txt").read_text() != first


def test_documented_commands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/data.md's split commands, as written, on a Label Studio export; then check-data reads the folder."""
    monkeypatch.chdir(tmp_path)
    docs = corpus(50, rare={"PROD": (1, 2, 3)})
    assert write_format("labelstudio", docs, tmp_path) == tmp_path / "export.json"
    for command in (
        "python -m ner_app split export.json --output mine",
        "python -m ner_app split export.json --output mine --dev 0.15 --test 0.15 --seed 2",
    ):
        assert main(command.split()[3:]) == 0, command
        assert "written to mine" in capsys.readouterr().out
    report = json.loads((tmp_path / "mine" / "split.json").read_text())
    assert report["seed"] == 2 and report["shares"] == {"dev": 0.15, "test": 0.15}
    assert [report["splits"][n]["entities"]["PROD"] for n in ("train", "dev", "test")] == [1, 1, 1]
    assert main(["check-data", "mine/"]) in (
        0,
        1,
    )  # it reads the three files (problems are its own to report)
    assert "sentences" in capsys.readouterr().out
