"""``check-data`` against a tiny corpus whose every count was checked by hand (the comments say why each
number is what it is): leakage, unseen and rare types, repaired sequences, unknown tags, changed spans."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ner_app.cli.commands import main
from ner_app.text.data_check import RARE, well_formed

# BIOES. Lines: 1 Alice, 4 Bob, 8 Acme, 13 Eve (B-PER never closed: ill-formed), 16 Gus (not annotated).
TRAIN = """Alice S-PER
runs O

Bob S-PER
met O
Carol S-PER

Acme B-ORG
Corp E-ORG
hired O
Dan S-PER

Eve B-PER
left O

Gus -
waves O
"""
# Line 1: the same sentence as train's line 4 (leakage); line 5: LOC, a type train never has.
VALID = """Bob S-PER
met O
Carol S-PER

Zed S-LOC
sleeps O
"""
TEST = """Fay S-PER
sings O
"""


def corpus(folder: Path, valid: str = VALID) -> Path:
    folder.mkdir(exist_ok=True)
    for name, text in (("train", TRAIN), ("valid", valid), ("test", TEST)):
        (folder / f"{name}.txt").write_text(text, encoding="utf-8")
    return folder


def check(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict]:
    code = main(["check-data", *argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_the_counts_are_the_hand_counted_ones(tmp_path, capsys):
    folder = corpus(tmp_path / "data")
    code, found = check(capsys, str(folder))
    train, dev, test = (found["splits"][n] for n in ("train", "dev", "test"))
    # train: 5 sentences of 2 + 3 + 4 + 2 + 2 tokens; PER Alice Bob Carol Dan Eve, ORG Acme Corp
    assert (train["sentences"], train["tokens"]) == (5, 13)
    assert train["entities"] == {"ORG": 1, "PER": 5}
    assert train["scheme"] == "BIOES"
    assert (train["ill_formed_sentences"], train["ill_formed_at"]) == (1, [f"{folder}/train.txt:13"])
    assert (train["unknown_tags"], train["unknown_share"]) == (1, round(1 / 13, 6))
    assert train["longest"][0] == {"tokens": 4, "at": f"{folder}/train.txt:8"}
    assert (dev["sentences"], dev["tokens"], dev["entities"]) == (2, 5, {"LOC": 1, "PER": 2})
    assert (test["sentences"], test["tokens"], test["entities"]) == (1, 2, {"PER": 1})

    problems = {(p["split"], p["kind"]): p for p in found["problems"]}
    assert set(problems) == {
        ("dev", "unseen types"),
        ("train", "rare types"),
        ("train", "unknown tags"),
        ("train", "ill-formed sequences"),
        ("dev", "leakage"),
        ("dev", "types missing"),  # ORG
        ("test", "types missing"),  # ORG
    }
    assert problems["dev", "unseen types"]["level"] == "blocking"
    assert "LOC (1)" in problems["dev", "unseen types"]["message"]
    assert problems["dev", "leakage"]["examples"] == [f"{folder}/valid.txt:1"]
    assert "ORG (1), PER (5)" in problems["train", "rare types"]["message"] and RARE == 20
    assert found["blocking"] == 1 and code == 1  # only the unseen type blocks


def test_without_the_blocking_problem_it_exits_0_and_the_text_report_says_so(tmp_path, capsys):
    folder = corpus(tmp_path / "data", valid="Zed S-PER\nsleeps O\n")
    assert main(["check-data", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "0 blocking problems, 5 warnings" in out  # rare, unknown, ill-formed, dev and test miss ORG
    assert "warning: train: ill-formed sequences:" in out and f"  {folder}/train.txt:13" in out
    assert "leakage" not in out


def test_unknown_tags_in_a_scored_split_block(tmp_path, capsys):
    folder = corpus(tmp_path / "data", valid="Zed -\nsleeps O\n\nBob S-PER\n")
    code, found = check(capsys, str(folder))
    blocking = [p for p in found["problems"] if p["level"] == "blocking"]
    assert code == 1 and [(p["split"], p["kind"], p["examples"]) for p in blocking] == [
        ("dev", "unknown tags in a scored split", [f"{folder}/valid.txt:1"])
    ]


def test_split_files_named_one_by_one(tmp_path, capsys):
    folder = corpus(tmp_path / "data")
    code, found = check(capsys, "--train", str(folder / "train.txt"), "--test", str(folder / "test.txt"))
    assert code == 0 and list(found["splits"]) == ["train", "test"]


def test_changed_spans_are_named_by_file_and_line(tmp_path, capsys):
    """A doccano split whose span ends inside a token: check-data lists it as convert's audit does."""
    folder = tmp_path / "spans"
    folder.mkdir()
    lines = [
        {"text": "Sonys hired Alice.", "label": [[0, 4, "ORG"], [12, 17, "PER"]]},
        {"text": "Bob met Sony.", "label": [[0, 3, "PER"], [8, 12, "ORG"]]},
    ]
    for name in ("train", "valid", "test"):
        (folder / f"{name}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    code, found = check(capsys, str(folder), "--format", "doccano")
    train = found["splits"]["train"]
    assert train["spans_changed"] == {"moved": 1}
    assert train["spans_changed_lines"] == [
        f"{folder}/train.jsonl:1: moved 'Sony' (ORG): an edge inside the tokens 'Sonys'; expanded to them"
    ]
    assert train["entities"] == {"ORG": 2, "PER": 2} and code == 0
    code, found = check(capsys, str(folder), "--format", "doccano", "--align", "strict")
    assert found["splits"]["train"]["entities"] == {"ORG": 1, "PER": 2}  # the same options as convert's


def test_brat_sentences_are_placed_by_their_file(tmp_path, capsys):
    """A brat document has no line of its own: check-data names its .ann file, not FILE:1."""
    folder = tmp_path / "brat"
    for name, text in (("train", "Sony hired Bob."), ("valid", "Bob met Sony."), ("test", "Sony hired Bob.")):
        (folder / name).mkdir(parents=True)
        (folder / name / "a.txt").write_text(text, encoding="utf-8")
        ann = [
            f"T{k}\t{t} {text.index(w)} {text.index(w) + len(w)}\t{w}"
            for k, (w, t) in enumerate([("Sony", "ORG"), ("Bob", "PER")], start=1)
        ]
        (folder / name / "a.ann").write_text("\n".join(ann) + "\n", encoding="utf-8")
    code, found = check(capsys, str(folder))
    assert found["splits"]["train"]["longest"] == [{"tokens": 4, "at": f"{folder}/train/a.ann"}]
    leak = next(p for p in found["problems"] if p["kind"] == "leakage")
    assert (leak["split"], leak["examples"]) == ("test", [f"{folder}/test/a.ann"])


def test_a_sentence_tagged_two_ways_is_named(tmp_path, capsys):
    """Label Studio's CONLL2003 export (``-DOCSTART- -X- O``, then ``token -X- _ tag`` lines, a sentence an
    annotation): two annotators' answers are two sentences with the same words. check-data names both places;
    a sentence repeated alike is not named."""
    folder = corpus(tmp_path / "data", valid="Zed S-PER\nsleeps O\n")
    rows = [
        "-DOCSTART- -X- O",
        *("Angela -X- _ B-PER", "Merkel -X- _ I-PER", ""),
        *("Angela -X- _ B-ORG", "Merkel -X- _ I-ORG", ""),
        *("Bob -X- _ B-PER", "sings -X- _ O", ""),
        *("Bob -X- _ B-PER", "sings -X- _ O", ""),
    ]
    (folder / "train.txt").write_text("\n".join(rows), encoding="utf-8")
    code, found = check(capsys, str(folder))
    problem = next(p for p in found["problems"] if p["kind"] == "sentences tagged differently")
    assert (problem["split"], problem["level"]) == ("train", "warning")
    assert problem["examples"] == [f"{folder}/train.txt:2 and {folder}/train.txt:5"]
    assert code == 0


@pytest.mark.parametrize(
    ("tags", "scheme", "ok"),
    [
        (["B-PER", "E-PER"], "BIOES", True),
        (["B-PER", "O"], "BIOES", False),
        (["B-PER"], "BIOES", False),  # not closed at the sentence end
        (["B-PER", "-"], "BIOES", True),  # what follows B- is unknown: not judged
        (["O", "I-PER"], "IOB2", False),
        (["O", "I-PER"], "IOB1", True),
        (["O", "B-PER"], "IOB1", False),
        (["I-PER", "B-PER"], "IOB1", True),
        (["E-PER"], "IOB2", False),  # a tag the scheme does not have
    ],
)
def test_well_formed(tags, scheme, ok):
    assert well_formed(tags, scheme) is ok
