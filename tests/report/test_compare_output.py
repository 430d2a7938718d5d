"""``compare``'s group names, ``--json``, tables cut to a width (console and page, the page measured in chromium)
and the chart's fitted axis, on copies of real tiny runs."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ner_app.cli.commands import main
from ner_app.report.compare_names import seed_in_name
from ner_app.report.compare_tables import MAX_WIDTH, compare_table
from tests.report.test_compare import HtmlTables, find, tables

# OntoNotes' 18 entity types: the per-type table of a model that knows them has 19 columns.
ONTONOTES = [
    "CARDINAL",
    "DATE",
    "EVENT",
    "FAC",
    "GPE",
    "LANGUAGE",
    "LAW",
    "LOC",
    "MONEY",
    "NORP",
    "ORDINAL",
    "ORG",
    "PERCENT",
    "PERSON",
    "PRODUCT",
    "QUANTITY",
    "TIME",
    "WORK_OF_ART",
]


def compare(capsys, *args) -> tuple[int, str, str]:
    code = main(["compare", *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def copy(runs: dict[str, Path], name: str, to: Path) -> Path:
    shutil.copytree(runs[name], to)
    return to


def names(out: str) -> list[list[str]]:
    return [row[:3] for row in find(tables(out), "Entity F1")[1:]]


# ------------------------------------------------------------------------------ group names
@pytest.mark.parametrize(
    ("name", "seed", "stem"),
    [
        ("b1", 1, "b"),
        ("b1", 7, None),
        ("elmo_seed3", 3, "elmo"),
        ("elmo-s3", 3, "elmo"),
        ("elmo_3", 3, "elmo"),
        ("x_seed_03", 3, "x"),
        ("seed3", 3, ""),
        ("3", 3, ""),
        ("s3", 3, ""),
        ("seed5", 7, None),
        ("runs3", 3, "runs"),
        ("b", 1, None),
    ],
)
def test_a_folder_loses_its_seed_only_when_the_record_says_so(name, seed, stem):
    assert seed_in_name(name, seed) == stem


def test_b1_and_b2_with_different_configs_keep_their_names(runs, capsys, tmp_path):
    b1 = copy(runs, "base_seed1", tmp_path / "b1")  # seed 1, lr 0.01
    b2 = copy(runs, "lr02_seed2", tmp_path / "b2")  # seed 2, lr 0.02: another config
    assert names(compare(capsys, b1, b2)[1]) == [["b1", "1", "1"], ["b2", "1", "2"]]


def test_b1_and_b2_of_one_config_are_its_seeds(runs, capsys, tmp_path):
    b1, b2 = copy(runs, "base_seed1", tmp_path / "b1"), copy(runs, "base_seed2", tmp_path / "b2")
    assert names(compare(capsys, b1, b2)[1]) == [["b", "2", "1, 2"]]


def test_a_digit_that_is_not_the_seed_stays_in_the_name(runs, capsys, tmp_path):
    b1 = copy(runs, "base_seed2", tmp_path / "b1")  # holds seed 2: "1" is not its seed
    c = copy(runs, "lr02_seed3", tmp_path / "c_seed2")  # holds seed 3
    assert names(compare(capsys, b1, c)[1]) == [["b1", "1", "2"], ["c_seed2", "1", "3"]]


def test_seed_folders_take_their_parents_name(runs, capsys, tmp_path):
    x1, x2 = (
        copy(runs, "base_seed1", tmp_path / "x" / "seed1"),
        copy(runs, "base_seed2", tmp_path / "x" / "seed2"),
    )
    y2 = copy(runs, "lr02_seed2", tmp_path / "y" / "seed2")
    assert names(compare(capsys, x1, y2, x2)[1]) == [["x", "2", "1, 2"], ["y", "1", "2"]]
    # Two configs under one parent: the parent no longer tells them apart, and neither do "seed1", "seed2"
    z1, z2 = (
        copy(runs, "base_seed1", tmp_path / "z" / "seed1"),
        copy(runs, "lr02_seed2", tmp_path / "z" / "seed2"),
    )
    assert names(compare(capsys, z1, z2)[1]) == [["optim.lr=0.01", "1", "1"], ["optim.lr=0.02", "1", "2"]]


# ------------------------------------------------------------------------------ --json
def test_json_holds_the_numbers_of_the_tables(runs, capsys):
    code, out, err = compare(capsys, *runs.values(), "--json")
    assert code == 0 and err == ""
    data = json.loads(out)
    assert list(data) == ["schema", "splits", "differing_keys", "groups", "pairing", "pairs"]
    assert data["schema"] == 1 and data["splits"] == ["dev", "test"] and data["pairing"] == "all"
    assert data["differing_keys"] == ["optim.lr"]
    _, text, _ = compare(capsys, *runs.values())
    t = tables(text)

    def two(summary: dict) -> str:
        return (
            f"{summary['mean']:.2f}"
            if summary["std"] is None
            else f"{summary['mean']:.2f} ± {summary['std']:.2f}"
        )

    rows = find(t, "Entity F1")[1:]
    assert [g["name"] for g in data["groups"]] == [r[0] for r in rows] == ["base", "lr02"]
    for group, row in zip(data["groups"], rows, strict=True):
        assert list(group) == [
            "name",
            "seeds",
            "config",
            "f1",
            "per_type",
            "elmo_mix",
            "transformer_mix",
            "runs",
        ]
        assert row == [
            group["name"],
            str(len(group["runs"])),
            ", ".join(map(str, group["seeds"])),
            two(group["f1"]["dev"]),
            two(group["f1"]["test"]),
        ]
        assert group["config"] == {"optim.lr": {"base": 0.01, "lr02": 0.02}[group["name"]]}
        for run in group["runs"]:  # each run's own numbers are its metrics.json's
            metrics = json.loads((Path(run["path"]) / "metrics.json").read_text())
            assert run["f1"] == {s: metrics[s]["f1"] for s in ("dev", "test")}
            assert run["per_type"]["test"] == {k: v["f1"] for k, v in metrics["test"]["per_type"].items()}
        header, *type_rows = find(t, "Test F1")
        mine = next(r for r in type_rows if r[0] == group["name"])
        assert mine[1:] == [two(group["per_type"]["test"][k]) for k in header[1:]]
        mix = find(t, "Learned ELMo mix")
        cells = next(r for r in mix[1:] if r[0] == group["name"])
        (recorded,) = group["elmo_mix"]
        assert recorded["place"] == "input" and cells[1] == str(recorded["runs"])
        three = [f"{s['mean']:.3f} ± {s['std']:.3f}" for s in [*recorded["softmax_w"], recorded["gamma"]]]
        assert cells[2:] == three

    (pair,) = data["pairs"]
    assert list(pair) == ["a", "b", "seeds", "difference", "per_seed"]
    header, row = find(t, "Paired by seed: B", keys=2)
    d = pair["difference"]
    cells = [f"{d[s]['mean']:+.2f} ± {d[s]['std']:.2f}" for s in ("dev", "test")]
    cells += [f"[{d[s]['ci95'][0]:+.2f}, {d[s]['ci95'][1]:+.2f}]" for s in ("dev", "test")]
    assert row == [pair["a"], pair["b"], ", ".join(map(str, pair["seeds"])), *cells]
    per_seed = find(t, "Paired by seed, each seed", keys=3)[1:]
    assert per_seed == [
        ["base", "lr02", str(p["seed"]), f"{p['dev']:+.2f}", f"{p['test']:+.2f}"] for p in pair["per_seed"]
    ]
    lr02 = {r["seed"]: r["f1"] for r in data["groups"][1]["runs"]}
    base = {r["seed"]: r["f1"] for r in data["groups"][0]["runs"]}
    assert [p["dev"] for p in pair["per_seed"]] == [lr02[s]["dev"] - base[s]["dev"] for s in (2, 3)]


def test_json_of_one_run_has_no_std_and_no_pairs(runs, capsys):
    data = json.loads(compare(capsys, runs["base_seed1"], "--json")[1])
    (group,) = data["groups"]
    assert group["f1"]["dev"]["std"] is None and group["f1"]["dev"]["n"] == 1
    assert data["pairs"] == [] and data["differing_keys"] == [] and group["config"] == {}


def test_json_and_html_together(runs, capsys, tmp_path):
    code, out, err = compare(
        capsys, runs["base_seed1"], runs["lr02_seed2"], "--json", "--html", tmp_path / "c.html"
    )
    assert code == 0 and json.loads(out)["groups"] and err == f"wrote {tmp_path / 'c.html'}\n"
    assert (tmp_path / "c.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


# ------------------------------------------------------------------------------ wide tables
def with_types(run: Path, to: Path, types: list[str]) -> Path:
    """A copy of ``run`` whose metrics.json scores ``types`` (derived from its own scores, all distinct)."""
    shutil.copytree(run, to)
    metrics = json.loads((to / "metrics.json").read_text())
    for split in ("dev", "test"):
        first = next(iter(metrics[split]["per_type"].values()))
        metrics[split]["per_type"] = {
            t: {**first, "f1": round((first["f1"] + 3.7 * k) % 100, 4)} for k, t in enumerate(types)
        }
    (to / "metrics.json").write_text(json.dumps(metrics))
    return to


@pytest.fixture
def wide(runs, tmp_path) -> list[Path]:
    """Four runs of two configs scored on 18 entity types."""
    return [
        with_types(runs[n], tmp_path / n, ONTONOTES)
        for n in ("base_seed2", "base_seed3", "lr02_seed2", "lr02_seed3")
    ]


def test_a_table_of_18_types_is_cut_to_the_console_width(wide, capsys):
    code, out, _ = compare(capsys, *wide)
    assert code == 0
    assert max(map(len, out.splitlines())) <= MAX_WIDTH
    parts = [title for title in tables(out) if title.startswith("Test F1")]
    assert len(parts) > 1 and all(re.search(r"\(part \d of \d\)$", p) for p in parts)
    header, *rows = find(tables(out), "Test F1")
    assert header == ["config", *ONTONOTES] and [r[0] for r in rows] == ["base", "lr02"]
    assert compare_table(wide) == out  # the function other commands print


def test_the_page_holds_the_same_parts_and_no_table_scrolls_in_chromium(wide, capsys, tmp_path):
    page = tmp_path / "compare.html"
    _, out, _ = compare(capsys, *wide, "--html", page)
    html = page.read_text(encoding="utf-8")
    parser = HtmlTables()
    parser.feed(html)
    assert parser.tables == tables(out)
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("no chromium on PATH (Debian: apt-get install chromium; .ci/run installs it)")
    # A copy that measures its own layout: the page's policy forbids scripts, so the copy drops it.
    probe = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", html).replace(
        "</body>",
        "<script>document.body.dataset.widths = [...document.querySelectorAll('table')].map("
        "t => t.scrollWidth + '/' + t.clientWidth).join(' ') + ' body/' + document.body.clientWidth;</script></body>",
    )
    (tmp_path / "probe.html").write_text(probe, encoding="utf-8")
    result = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--window-size=1200,900",
            "--dump-dom",
            (tmp_path / "probe.html").as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    found = re.search(r'data-widths="([^"]*)"', result.stdout)
    assert found is not None, result.stdout[-2000:]
    *measures, body = found.group(1).split(" ")
    assert len(measures) == len(parser.tables) and int(body.split("/")[1]) <= 1200
    for measure in measures:  # a table wider than its box would scroll: none does
        scroll, client = map(int, measure.split("/"))
        assert scroll <= client, measure


# ------------------------------------------------------------------------------ the chart's axis
def test_the_axis_is_fitted_and_says_it_does_not_start_at_zero():
    from ner_app.report.charts import seed_scores

    scores = {"dev": [[91.00, 91.04], [91.15, 91.19]], "test": [[91.02, 91.06], [91.17, 91.21]]}
    axis = seed_scores(["a", "b"], scores).axes[0]
    low, high = axis.get_ylim()
    assert 90.9 < low < 91.0 and 91.21 < high < 91.3  # the values with a 15% margin
    assert axis.get_ylabel() == f"entity F1 (%); the axis starts at {low:.2f}, not 0"
    axis = seed_scores(["a"], {"dev": [[0.0, 0.1]], "test": [[0.0, 0.0]]}).axes[0]
    assert axis.get_ylim()[0] == 0 and axis.get_ylabel() == "entity F1 (%)"  # starts at 0: nothing to say
    assert seed_scores(["a"], {"dev": [[100.0]], "test": [[99.9]]}).axes[0].get_ylim()[1] == 100


def test_the_page_says_where_the_axis_starts(runs, capsys, tmp_path):
    from ner_app.report.compare import group_runs, read_runs
    from ner_app.report.compare_html import f1_chart

    compare(capsys, *runs.values(), "--html", tmp_path / "c.html")
    html = (tmp_path / "c.html").read_text(encoding="utf-8")
    low = f1_chart(group_runs(read_runs(runs.values()))).axes[0].get_ylim()[0]
    said = re.findall(r"The F1 axis is fitted to the scores: it starts at (\d+\.\d\d), not at 0\.", html)
    assert said == ([] if low == 0 else [f"{low:.2f}"])
