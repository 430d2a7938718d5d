"""``find-threshold`` and ``select`` through the real command on a tiny trained model: the sweep against seqeval
on the filtered predictions, the selection against scores computed sentence by sentence, determinism."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import train
from ner_app.cli.commands import main
from ner_app.decisions.selection import read_pool, tokens_of
from ner_app.decisions.threshold import GRID
from ner_app.predict.predictor import Predictor
from ner_app.records import sha256_file
from ner_app.tagger.crf.uncertainty import combine, sentence_uncertainty
from ner_app.text.conll import read_conll
from ner_app.text.scores import entity_scores
from ner_app.text.tags import entities

pytestmark = pytest.mark.system  # trains a tiny run: out of the fast lane

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "data" / "tiny_conll"
POOL = [
    "Alice Smith flew to Paris.",
    "Acme Corp hired Bob Jones in Berlin.",
    "",
    "The German team beat Acme Corp.",
    "Carol visited London and Paris with Dave. Then she flew home.",
    "Bob likes Berlin",
    "nothing to see here",
    "Dave Smith met Carol Jones in London.",
    "Paris",
]


@pytest.fixture(scope="module")
def export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny run stopped after 6 epochs: it still makes mistakes and is unsure, so thresholds matter."""
    out = tmp_path_factory.mktemp("active") / "run"
    args = ["--config", str(ROOT / "configs/tiny.yaml"), f"output_dir={out}", f"data.dir={TINY}"]
    assert train.main([*args, "trainer.max_epochs=6", "trainer.threads=1", "elmo.cache_dir=null"]) == 0
    return out / "export"


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    assert main(list(args)) == 0
    return json.loads(capsys.readouterr().out)


def filtered_scores(predictor: Predictor, gold_file: Path, threshold: float) -> dict:
    """seqeval on the predictions with every entity scoring below ``threshold`` turned into O: computed here
    from the tags and probabilities, independently of the sweep's counting."""
    sentences = read_conll(gold_file)
    predicted = []
    for tags, probs in predictor.tag([s.tokens for s in sentences], [s.doc for s in sentences]):
        tags = list(tags)
        for _, start, end in entities(tags, predictor.scheme):
            if round(sum(probs[start:end]) / (end - start), 4) < threshold:
                tags[start:end] = ["O"] * (end - start)
        predicted.append(predictor.to_source(tags))
    return entity_scores([s.tags for s in sentences], predicted)


@pytest.mark.parametrize("split", ["valid.txt", "test.txt"])
def test_find_threshold_rows_equal_seqeval_on_the_filtered_predictions(export, capsys, split) -> None:
    gold = TINY / split
    result = run_json(capsys, "find-threshold", "--model", str(export), "--input", str(gold), "--json")
    predictor = Predictor.from_export(export)
    assert [row["min_score"] for row in result["grid"]] == list(GRID)
    assert len(result["every_score"]) > 2  # the model is unsure: entities score differently
    for row in [*result["grid"], *result["every_score"]]:
        direct = filtered_scores(predictor, gold, row["min_score"])
        for key in ("precision", "recall", "f1"):
            assert row[key] == pytest.approx(direct[key], abs=1e-9), (row, direct)
    evaluated = run_json(capsys, "evaluate", "--model", str(export), "--input", str(gold), "--json")
    assert result["grid"][0]["f1"] == pytest.approx(evaluated["f1"])  # threshold 0 keeps every entity
    best = max(result["every_score"], key=lambda r: r["f1"])
    assert result["suggested"]["row"]["f1"] == best["f1"]


def test_find_threshold_target_precision_is_the_lowest_reaching_it(export, capsys) -> None:
    gold = str(TINY / "valid.txt")
    plain = run_json(capsys, "find-threshold", "--model", str(export), "--gold", gold, "--json")
    rows = plain["every_score"]
    target = (rows[0]["precision"] + max(r["precision"] for r in rows)) / 200  # between the lowest and best
    result = run_json(
        capsys,
        "find-threshold",
        "--model",
        str(export),
        "--gold",
        gold,
        "--json",
        "--precision",
        str(target),
    )
    chosen = result["suggested"]["row"]
    assert chosen["precision"] >= 100 * target
    assert all(r["precision"] < 100 * target for r in rows if r["min_score"] < chosen["min_score"])
    assert main(["find-threshold", "--model", str(export), "--gold", gold, "--precision", str(target)]) == 0
    out = capsys.readouterr().out
    assert "| min score | entities kept | precision | recall | F1 |" in out
    assert f"suggested: --min-score {chosen['min_score']:.4f} (the lowest threshold with precision >=" in out
    # the documented commands
    assert main(["find-threshold", "--model", str(export), "--gold", gold]) == 0
    best = max(rows, key=lambda r: (r["f1"], -r["min_score"]))
    assert (
        f"suggested: --min-score {best['min_score']:.4f} (the best F1, {best['f1']:.2f};"
        in capsys.readouterr().out
    )
    assert main(["find-threshold", "--model", str(export), "--gold", gold, "--precision", "0.95"]) == 0
    reaching = [r for r in rows if r["precision"] >= 95]
    out = capsys.readouterr().out.splitlines()[-1]
    if reaching:
        assert out.startswith(f"suggested: --min-score {reaching[0]['min_score']:.4f}")
    else:
        assert out.startswith("no threshold reaches precision 95.00% on this file (the highest is")


def write_pool(tmp_path: Path, lines: list[str]) -> Path:
    pool = tmp_path / "pool.txt"
    pool.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return pool


def selected(export: Path, pool: Path, out: Path, *extra: str) -> list[str]:
    assert main(["select", "--model", str(export), "--input", str(pool), "--output", str(out), *extra]) == 0
    return out.read_text(encoding="utf-8").splitlines()


@pytest.mark.parametrize("strategy", ["least-confidence", "margin", "entropy", "mnlp"])
def test_select_ranks_as_each_sentence_scored_alone(export, tmp_path, strategy) -> None:
    """The pool is scored in batches, padded and sorted by length; the ranking is the one that scoring each
    line alone (its sentences together) gives."""
    pool = write_pool(tmp_path, POOL)
    got = selected(export, pool, tmp_path / "out.txt", "--k", "8", "--strategy", strategy)
    predictor = Predictor.from_export(export)
    candidates, kind = read_pool(pool)
    assert kind == "text" and len(candidates) == 8  # the blank line is no candidate
    keys = {}
    for c in candidates:
        alone = predictor.piece_batches([(i, list(s)) for i, s in enumerate(c.sentences)], None)
        parts = [
            u
            for _, batch in alone
            for u in sentence_uncertainty(
                predictor.tagger.crf, predictor.tagger.emissions(batch), batch["mask"]
            )
        ]
        keys[c.text] = combine(parts).rank_key(strategy)
    assert got == sorted(keys, key=lambda text: -keys[text])
    assert len(set(keys.values())) == len(keys)  # no ties: the order is the scores', not the seed's


def test_select_is_deterministic_for_a_seed_and_differs_for_another(export, tmp_path, capsys) -> None:
    pool = write_pool(tmp_path, [f"Sentence number {i} about Paris and Acme Corp." for i in range(30)])
    runs = {
        (strategy, seed): selected(
            export,
            pool,
            tmp_path / f"{strategy}{seed}.txt",
            "--k",
            "6",
            "--strategy",
            strategy,
            "--seed",
            seed,
        )
        for strategy in ("random", "margin")
        for seed in ("1", "2")
    }
    again = selected(export, pool, tmp_path / "again.txt", "--k", "6", "--strategy", "random", "--seed", "1")
    assert again == runs["random", "1"]
    assert runs["random", "1"] != runs["random", "2"]
    assert len(set(runs["random", "1"])) == 6
    assert runs["margin", "1"] == runs["margin", "2"]  # distinct scores: the seed only orders ties
    pool_order = selected(
        export, pool, tmp_path / "p.txt", "--k", "6", "--strategy", "random", "--seed", "1", "--order", "pool"
    )
    lines = pool.read_text().splitlines()
    assert sorted(pool_order, key=lines.index) == pool_order and set(pool_order) == set(runs["random", "1"])
    capsys.readouterr()


def test_select_writes_predictions_as_predict_does(export, tmp_path, capsys) -> None:
    pool = write_pool(tmp_path, POOL)
    got = selected(export, pool, tmp_path / "s.jsonl", "--k", "3", "--format", "jsonl")
    texts = selected(export, pool, tmp_path / "s.txt", "--k", "3")
    assert len(got) == 3
    every = selected(export, pool, tmp_path / "all.jsonl", "--k", "100", "--format", "jsonl")
    assert every[:3] == got  # rank order: the first three are the three most uncertain
    assert [json.loads(line)["text"] for line in got] == texts
    (tmp_path / "chosen.txt").write_text("".join(t + "\n" for t in texts), encoding="utf-8")
    capsys.readouterr()
    assert main(["predict", "--model", str(export), "--input", str(tmp_path / "chosen.txt")]) == 0
    assert capsys.readouterr().out.splitlines() == got
    conll = selected(export, TINY / "test.txt", tmp_path / "s.conll", "--k", "2", "--format", "conll")
    sentences = "\n".join(conll).strip().split("\n\n")
    assert len(sentences) == 2 and all(len(row.split()) == 5 for s in sentences for row in s.splitlines())
    plain = selected(export, TINY / "test.txt", tmp_path / "s2.txt", "--k", "2")
    assert [" ".join(row.split()[0] for row in s.splitlines()) for s in sentences] == plain
    # a tool's task is a document: each selected line is one task, named by the model that predicted it
    tasks = json.loads(
        "\n".join(selected(export, pool, tmp_path / "s.json", "--k", "3", "--format", "labelstudio"))
    )
    assert [t["data"]["text"] for t in tasks] == texts
    assert {t["predictions"][0]["model_version"] for t in tasks} == {
        f"run-{sha256_file(export / 'model.safetensors')[:8]}"
    }


def test_k_larger_than_the_pool_selects_all_and_says_so(export, tmp_path, capsys) -> None:
    pool = write_pool(tmp_path, POOL)
    got = selected(export, pool, tmp_path / "all.txt", "--k", "100", "--strategy", "margin")
    assert sorted(got) == sorted(line for line in POOL if line)
    err = capsys.readouterr().err
    assert "--k 100 is more than the pool's 8 lines: all of them are selected" in err


@pytest.mark.parametrize("strategy", ["mnlp", "random"])
def test_a_token_budget_selects_the_longest_prefix_of_the_ranking_that_fits(
    export, tmp_path, capsys, strategy
) -> None:
    """--tokens N: the ranking (as --k 100 gives it) cut before the first candidate that would take the selected
    tokens over N; with --k too, both limits hold."""
    pool = write_pool(tmp_path, [line for line in POOL if len(line.split()) > 1])  # a budget of 1 leaves none
    candidates, _ = read_pool(pool)
    assert len(candidates) == 7
    size = {c.text: tokens_of(c) for c in candidates}
    ranking = selected(export, pool, tmp_path / "all.txt", "--k", "100", "--strategy", strategy)
    capsys.readouterr()
    totals = [sum(size[t] for t in ranking[: i + 1]) for i in range(len(ranking))]
    for budget in (totals[0], totals[0] + 1, totals[2] - 1, totals[2], totals[-1], totals[-1] + 50):
        got = selected(export, pool, tmp_path / "b.txt", "--tokens", str(budget), "--strategy", strategy)
        expected = [t for t, total in zip(ranking, totals, strict=True) if total <= budget]
        assert got == expected, budget
        assert (
            f"selected {len(got):,} of 7 lines, {sum(size[t] for t in got):,} tokens ("
            in capsys.readouterr().err
        )
    both = selected(
        export, pool, tmp_path / "k.txt", "--tokens", str(totals[-1]), "--k", "2", "--strategy", strategy
    )
    assert both == ranking[:2]
    capsys.readouterr()
    assert (
        main(
            [
                "select",
                "--model",
                str(export),
                "--input",
                str(pool),
                "--output",
                str(tmp_path / "none.txt"),
                "--tokens",
                str(totals[0] - 1),
                "--strategy",
                strategy,
            ]
        )
        == 2
    )
    line = capsys.readouterr().err.strip().splitlines()
    first = next(c for c in candidates if c.text == ranking[0])
    assert line == [
        f"error: --tokens {totals[0] - 1}: the first candidate of the ranking (line {first.line} of the pool) "
        f"alone has {totals[0]:,} tokens; nothing was selected (raise --tokens)"
    ]
    assert not (tmp_path / "none.txt").exists()


def test_read_pool_formats(tmp_path) -> None:
    conll = tmp_path / "partial.conll"
    conll.write_text("Alice I-PER\nflew -\n\n-DOCSTART- O\n\nBob -\n", encoding="utf-8")
    candidates, kind = read_pool(conll)
    assert kind == "conll"
    assert [(c.text, c.line, c.doc) for c in candidates] == [("Alice flew", 1, 0), ("Bob", 6, 1)]
    assert candidates[0].rows == ("Alice I-PER", "flew -")
    tokens = tmp_path / "tokens.txt"
    tokens.write_text("Alice\nflew\n\nBob\n", encoding="utf-8")
    assert [c.text for c in read_pool(tokens)[0]] == ["Alice", "flew", "Bob"]  # auto: lines of text
    assert [c.text for c in read_pool(tokens, "conll")[0]] == ["Alice flew", "Bob"]
    text = tmp_path / "text.txt"
    text.write_text("Alice flew to Paris. Bob stayed.\n\nO\n", encoding="utf-8")
    candidates, kind = read_pool(text)
    assert kind == "text" and [c.line for c in candidates] == [1, 3]
    assert candidates[0].sentences == (("Alice", "flew", "to", "Paris", "."), ("Bob", "stayed", "."))


def test_the_command_line_names_every_strategy() -> None:
    """The parser names the strategies without importing torch; they must be the uncertainty module's."""
    from ner_app.cli.select import STRATEGY_NAMES
    from ner_app.tagger.crf.uncertainty import STRATEGIES

    assert sorted(STRATEGY_NAMES) == sorted(STRATEGIES)
