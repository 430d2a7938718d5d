"""benchmarks/active_learning.py --collect: the rounds a stopped benchmark finished, reported without training."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.active_learning import label_share

ROOT = Path(__file__).resolve().parents[2]


def _round(folder: Path, sentences: int, tokens_each: int, dev: float, test: float) -> None:
    (folder / "data").mkdir(parents=True)
    (folder / "run").mkdir(parents=True)
    block = "\n".join(f"w{i} O" for i in range(tokens_each))
    (folder / "data" / "train.txt").write_text("\n\n".join([block] * sentences) + "\n", encoding="utf-8")
    metrics = {"dev": {"f1": dev}, "test": {"f1": test}}
    (folder / "run" / "metrics.json").write_text(json.dumps(metrics), encoding="utf-8")


@pytest.mark.system
def test_collect_reports_each_strategy_up_to_the_round_every_seed_finished(tmp_path: Path) -> None:
    for seed, shift in ((1, 0.0), (2, 2.0)):
        base = tmp_path / f"seed{seed}"
        _round(base / "round0", 10, 2, 50 + shift, 40 + shift)
        for r, test in ((1, 60.0), (2, 70.0)):
            _round(base / "random" / f"round{r}", 10 + 10 * r, 2, 0.0, test + shift)
        _round(base / "margin" / "round1", 20, 4, 0.0, 65 + shift)
        if seed == 1:  # a round that only one seed finished is left out
            _round(base / "margin" / "round2", 30, 4, 0.0, 90.0)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.active_learning",
            "--collect",
            "--out",
            str(tmp_path),
            "--seeds",
            "1",
            "2",
        ]
        + ["--rounds", "2", "--strategies", "random", "margin"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "finished: random 2, margin 1" in done.stdout
    assert "| margin | 1 | 20 | 80 | 0.00 ± 0.00 | 66.00 ± 1.41 |" in done.stdout
    assert "margin does not reach random's round-2 test F1 (71.00)" in done.stdout
    results = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    assert [row["test"] for row in results["results"]["random"]["1"]] == [40.0, 60.0, 70.0]
    assert (tmp_path / "active_learning.png").stat().st_size > 1000


def test_label_share_in_sentences_and_tokens_interpolates_between_rounds() -> None:
    def rows(points: list[tuple[int, int, float]]) -> list[dict[str, float]]:
        return [{"sentences": s, "tokens": t, "test": f} for s, t, f in points]

    results = {
        "random": {1: rows([(10, 100, 50.0), (20, 200, 60.0), (30, 300, 70.0)])},
        "margin": {1: rows([(10, 100, 50.0), (20, 400, 80.0)])},
    }
    share = label_share(results)  # type: ignore[arg-type]
    # 70 lies two thirds of the way from 50 to 80: 10 + 20/3 sentences of 30, 100 + 200 tokens of 300
    assert share["best"] == "margin" and abs(share["share"] - (10 + 20 / 3) / 30) < 1e-12
    assert abs(share["token_share"] - 1.0) < 1e-12
    assert share["strategies"] == {"margin": {"share": share["share"], "token_share": share["token_share"]}}
    results["margin"] = {1: rows([(10, 100, 50.0), (20, 400, 65.0)])}
    assert label_share(results)["share"] is None  # type: ignore[arg-type]
    results["entropy"] = {1: rows([(10, 100, 50.0), (20, 150, 75.0)])}  # reaches 70 at 140 tokens
    shares = label_share(results)["strategies"]  # type: ignore[arg-type]
    assert shares["margin"] == {"share": None, "token_share": None}
    assert abs(shares["entropy"]["token_share"] - 140 / 300) < 1e-12
