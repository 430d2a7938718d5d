"""``evaluate``: conlleval's counts exactly, the run's own metrics.json, and one line for bad input."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

import train
from ner_app.cli.commands import main
from ner_app.text.conll import read_predictions
from ner_app.text.scores import entity_scores

pytestmark = pytest.mark.system  # trains a tiny run: out of the fast lane

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "data" / "tiny_conll"


# ------------------------------------------------------------------ an independent conlleval, from its rules
def _split(tag: str) -> tuple[str, str]:
    return ("O", "") if tag == "O" else (tag[0], tag[2:])


def _ends(prev_tag: str, tag: str, prev_type: str, kind: str) -> bool:
    """conlleval's endOfChunk: does the chunk open at the previous token end before this one?"""
    if (prev_tag, tag) in {
        ("B", "B"),
        ("B", "O"),
        ("I", "B"),
        ("I", "O"),
        ("E", "E"),
        ("E", "I"),
        ("E", "O"),
    }:
        return True
    return prev_tag not in ("O", ".") and prev_type != kind


def _starts(prev_tag: str, tag: str, prev_type: str, kind: str) -> bool:
    """conlleval's startOfChunk: does a chunk start at this token?"""
    if (prev_tag, tag) in {
        ("B", "B"),
        ("I", "B"),
        ("O", "B"),
        ("O", "I"),
        ("E", "E"),
        ("E", "I"),
        ("O", "E"),
    }:
        return True
    return tag not in ("O", ".") and prev_type != kind


def conlleval_chunks(tags: list[str]) -> set[tuple[int, int, str]]:
    """(start, end exclusive, type) of every chunk conlleval reads in one sentence."""
    chunks, start = set(), None
    prev_tag, prev_type = "O", ""
    for i, tag in enumerate([*tags, "O"]):  # the sentence boundary closes an open chunk
        cur, kind = _split(tag)
        if start is not None and _ends(prev_tag, cur, prev_type, kind):
            chunks.add((start, i, prev_type))
            start = None
        if _starts(prev_tag, cur, prev_type, kind):
            start = i
        prev_tag, prev_type = cur, kind
    return chunks


def conlleval(gold: list[list[str]], guessed: list[list[str]]) -> dict[str, tuple[int, int, int]]:
    """Per type and overall (key ""): (correct, gold chunks, guessed chunks), as conlleval counts them."""
    counts: dict[str, list[int]] = {"": [0, 0, 0]}
    for g, p in zip(gold, guessed, strict=True):
        a, b = conlleval_chunks(g), conlleval_chunks(p)
        for key, chunks in ((0, a & b), (1, a), (2, b)):
            for chunk in chunks:
                for name in ("", chunk[2]):
                    counts.setdefault(name, [0, 0, 0])[key] += 1
    return {k: (v[0], v[1], v[2]) for k, v in counts.items()}


def _f1(correct: int, gold: int, guessed: int) -> float:
    p = 100 * correct / guessed if guessed else 0.0
    r = 100 * correct / gold if gold else 0.0
    return 2 * p * r / (p + r) if p + r else 0.0


def test_entity_scores_count_like_conlleval_on_random_tags() -> None:
    """Brute force: well-formed and ill-formed IOB1/IOB2 sequences, the one scorer against conlleval."""
    rng = random.Random(0)
    tags = ["O", "O", "O", "B-PER", "I-PER", "B-LOC", "I-LOC", "I-ORG", "B-ORG"]
    for _ in range(300):
        lengths = [rng.randint(1, 8) for _ in range(rng.randint(1, 5))]
        gold = [[rng.choice(tags) for _ in range(n)] for n in lengths]
        guessed = [[t if rng.random() < 0.7 else rng.choice(tags) for t in s] for s in gold]
        counts = conlleval(gold, guessed)
        scores = entity_scores(gold, guessed)
        assert scores["f1"] == pytest.approx(_f1(*counts[""]), abs=1e-9), (gold, guessed)
        for name, s in scores["per_type"].items():
            assert s["support"] == counts[name][1]
            assert s["f1"] == pytest.approx(_f1(*counts[name]), abs=1e-9), (name, gold, guessed)


# ------------------------------------------------------------------------------------------- the command
@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny run stopped after 6 epochs: a tagger that still makes mistakes on dev (F1 66.67)."""
    out = tmp_path_factory.mktemp("evaluate") / "run"
    code = train.main(
        [
            "--config",
            str(ROOT / "configs/tiny.yaml"),
            f"output_dir={out}",
            f"data.dir={TINY}",
            "elmo.enabled=false",
            "trainer.max_epochs=6",
        ]
    )
    assert code == 0
    return out


def test_evaluate_json_is_conlleval_and_the_runs_metrics(run: Path, tmp_path: Path, capsys) -> None:
    predictions = tmp_path / "dev.conll"
    code = main(
        [
            "evaluate",
            "--model",
            str(run / "export"),
            "--input",
            str(TINY / "valid.txt"),
            "--json",
            "--predictions",
            str(predictions),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    result = json.loads(out)
    metrics = json.loads((run / "metrics.json").read_text())
    assert result["f1"] == pytest.approx(metrics["dev"]["f1"], abs=1e-9)
    assert result["per_type"].keys() == metrics["dev"]["per_type"].keys()
    rows = read_predictions(predictions)
    counts = conlleval([g for _, g, _ in rows], [p for _, _, p in rows])
    assert result["f1"] == pytest.approx(_f1(*counts[""]), abs=1e-9)
    for name, s in result["per_type"].items():
        assert (s["support"], s["f1"]) == (counts[name][1], pytest.approx(_f1(*counts[name]), abs=1e-9))
    assert rows == [(t, g, p) for t, g, p in read_predictions(run / "predictions_dev.conll")]
    assert result["sentences"] == len(rows) and result["scheme"] == "IOB1"
    assert 0 < result["f1"] < 100  # a tagger that still errs: the comparisons above are not trivial


def test_evaluate_prints_a_table_with_every_type(run: Path, capsys) -> None:
    assert main(["evaluate", "--model", str(run / "export"), "--gold", str(TINY / "test.txt")]) == 0
    out = capsys.readouterr().out
    metrics = json.loads((run / "metrics.json").read_text())
    assert f"**{metrics['test']['f1']:.2f}**" in out
    for name in metrics["test"]["per_type"]:
        assert f"| {name} |" in out


@pytest.mark.parametrize(
    "content, expected",
    [
        ("Alice B-PER\nflew O\n", None),
        ("Alice S-PER\nflew O\n", "E- or S- tags found; evaluate reads IOB1 or IOB2 tags"),
        ("", "no sentences"),
        ("Alice\n", "expected"),
        (b"\xff\xfe bad\n", "UTF-8"),
        (
            "Alice B-PER\nflew -\n",
            "gold.conll:2: expected an annotated tag, found '-' (not annotated) for 'flew'",
        ),
    ],
)
def test_evaluate_bad_gold_files_are_one_line(run: Path, tmp_path: Path, capsys, content, expected) -> None:
    gold = tmp_path / "gold.conll"
    gold.write_bytes(content if isinstance(content, bytes) else content.encode())
    code = main(["evaluate", "--model", str(run / "export"), "--gold", str(gold)])
    err = capsys.readouterr().err
    if expected is None:
        assert code == 0
        return
    assert code == 2 and len(err.strip().splitlines()) == 1 and expected in err, err
    assert str(gold) in err


def test_evaluate_missing_input_and_model_are_one_line(run: Path, tmp_path: Path, capsys) -> None:
    assert main(["evaluate", "--model", str(run / "export"), "--gold", str(tmp_path / "none.conll")]) == 2
    assert main(["evaluate", "--model", str(tmp_path), "--gold", str(TINY / "valid.txt")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "not a file" in err[0] and "not a ner_app export" in err[1]


# ------------------------------------------------------------------------------- case views, gold's scheme
def _rewrite(source: Path, target: Path, token=lambda t: t, tag=lambda tags: tags) -> Path:
    """A CoNLL copy of ``source`` with every token and every sentence's tags changed."""
    from ner_app.text.conll import read_conll

    lines = []
    for s in read_conll(source):
        lines += [f"{token(t)} {g}" for t, g in zip(s.tokens, tag(s.tags), strict=True)] + [""]
    target.write_text("\n".join(lines) + "\n")
    return target


def _evaluate_json(model: Path, gold: Path, capsys, *extra: str) -> dict:
    assert main(["evaluate", "--model", str(model), "--gold", str(gold), "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def test_case_views_score_the_file_as_written_lower_and_upper_cased(
    run: Path, tmp_path: Path, capsys
) -> None:
    model, gold = run / "export", TINY / "valid.txt"
    result = _evaluate_json(model, gold, capsys, "--case-views")
    views = result["case_views"]
    assert list(views) == ["cased", "lower", "upper"]
    assert {k: result[k] for k in ("precision", "recall", "f1")} == {
        k: views["cased"][k] for k in ("precision", "recall", "f1")
    }
    assert _evaluate_json(model, gold, capsys)["f1"] == views["cased"]["f1"]  # the flag changes no score
    # a view of the file scores as the file of that view: an independent path to every number
    for view, change in (("lower", str.lower), ("upper", str.upper)):
        copy = _rewrite(gold, tmp_path / f"{view}.txt", token=change)
        alone = _evaluate_json(model, copy, capsys)
        assert (alone["precision"], alone["recall"], alone["f1"]) == (
            views[view]["precision"],
            views[view]["recall"],
            views[view]["f1"],
        )
        assert alone["per_type"] == views[view]["per_type"]
    assert views["upper"]["f1"] != views["cased"]["f1"]  # the tiny tagger reads case: the views differ
    assert main(["evaluate", "--model", str(model), "--input", str(gold), "--case-views"]) == 0
    out = capsys.readouterr().out
    for view in views:
        assert f"| {view} | {views[view]['precision']:.2f} | {views[view]['recall']:.2f} |" in out


def test_predictions_are_written_in_the_gold_files_scheme(run: Path, tmp_path: Path, capsys) -> None:
    from ner_app.text.tags import convert, detect_scheme

    iob2 = _rewrite(TINY / "test.txt", tmp_path / "iob2.txt", tag=lambda tags: convert(tags, "IOB1", "IOB2"))
    written = tmp_path / "predicted.conll"
    model = run / "export"
    result = _evaluate_json(model, iob2, capsys, "--predictions", str(written))
    assert result["scheme"] == "IOB2"
    predicted = [p for _, _, p in read_predictions(written)]  # a tag sequence per sentence
    assert any(t.startswith("B-") for p in predicted for t in p)  # IOB1 starts most entities with I-
    assert detect_scheme(predicted) == "IOB2"
    assert result["f1"] == _evaluate_json(model, TINY / "test.txt", capsys)["f1"]  # the same entities
    iob1 = tmp_path / "iob1.conll"
    _evaluate_json(model, TINY / "test.txt", capsys, "--predictions", str(iob1))
    as_iob1 = [p for _, _, p in read_predictions(iob1)]
    assert detect_scheme(as_iob1) == "IOB1"
    assert [convert(p, "IOB1", "IOB2") for p in as_iob1] == predicted
