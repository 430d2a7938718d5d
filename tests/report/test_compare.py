"""``compare``: tables checked against numbers computed by hand from real runs' metrics.json files."""

import base64
import io
import json
import math
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest
import torch

from ner_app.cli.commands import main
from tests.report.conftest import RECIPES

ROOT = Path(__file__).resolve().parents[2]


def f1(folder: Path, split: str, kind: str | None = None) -> float:
    scores = json.loads((folder / "metrics.json").read_text())[split]
    return scores["f1"] if kind is None else scores["per_type"][kind]["f1"]


def by_hand(values: list[float]) -> str:
    """mean ± sample std, written out rather than through the code under test."""
    mean = sum(values) / len(values)
    if len(values) == 1:
        return f"{mean:.2f}"
    return f"{mean:.2f} ± {math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1)):.2f}"


def compare(capsys, *args) -> tuple[int, str, str]:
    code = main(["compare", *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def tables(markdown: str) -> dict[str, list[list[str]]]:
    """Title (its wrapped lines joined) -> rows (header first) of every Markdown table."""
    out: dict[str, list[list[str]]] = {}
    for block in markdown.strip().split("\n\n**"):
        title, _, body = block.strip("*").partition("**\n\n")
        lines = [line for line in body.splitlines() if not line.startswith("|--")]
        out[title.replace("\n", " ")] = [[c.strip() for c in line.strip("|").split(" | ")] for line in lines]
    return out


def find(tables_: dict[str, list[list[str]]], start: str, keys: int = 1) -> list[list[str]]:
    """The table whose title starts with ``start``; a table cut into parts ("(part i of n)") put back
    together, its ``keys`` leading columns once."""
    parts = [rows for title, rows in tables_.items() if title.startswith(start)]
    whole = [list(row) for row in parts[0]]
    for rows in parts[1:]:
        assert [r[:keys] for r in rows] == [r[:keys] for r in whole]  # every part repeats the key columns
        whole = [w + r[keys:] for w, r in zip(whole, rows, strict=True)]
    return whole


def test_table_equals_numbers_by_hand(runs, capsys):
    code, out, _ = compare(capsys, *runs.values())
    assert code == 0
    t = tables(out)
    rows = {r[0]: r for r in find(t, "Entity F1")[1:]}
    assert list(rows) == ["base", "lr02"]  # named by their folders without the seed
    for name, (_, seeds) in RECIPES.items():
        folders = [runs[f"{name}_seed{s}"] for s in seeds]
        assert rows[name] == [
            name,
            str(len(seeds)),
            ", ".join(map(str, seeds)),
            by_hand([f1(f, "dev") for f in folders]),
            by_hand([f1(f, "test") for f in folders]),
        ]
    assert len({rows["base"][3], rows["lr02"][3]}) == 2, "both recipes scored alike: a weak test"
    for split, title in (("test", "Test F1"), ("dev", "Dev F1")):
        header, *type_rows = find(t, title)
        assert header == ["config", "LOC", "MISC", "ORG", "PER"]
        for row in type_rows:
            _, seeds = RECIPES[row[0]]
            folders = [runs[f"{row[0]}_seed{s}"] for s in seeds]
            assert row[1:] == [by_hand([f1(f, split, k) for f in folders]) for k in header[1:]]
    assert find(t, "What differs") == [["config", "optim.lr"], ["base", "0.01"], ["lr02", "0.02"]]


def test_paired_by_seed(runs, capsys):
    _, out, _ = compare(capsys, *runs.values())
    header, *rows = find(tables(out), "Paired by seed: B", keys=2)
    assert header == ["A", "B", "shared seeds", "dev ΔF1", "test ΔF1", "dev 95% CI", "test 95% CI"]
    diffs = {
        s: [f1(runs[f"lr02_seed{n}"], s) - f1(runs[f"base_seed{n}"], s) for n in (2, 3)]
        for s in ("dev", "test")
    }

    def interval(values: list[float]) -> str:  # two seeds: 1 degree of freedom, t(0.975, 1) = 12.706
        mean, std = sum(values) / 2, abs(values[0] - values[1]) / math.sqrt(2)
        half = 12.7062 * std / math.sqrt(2)
        return f"[{mean - half:+.2f}, {mean + half:+.2f}]"

    signed = {s: ("+" if sum(v) >= 0 else "") + by_hand(v) for s, v in diffs.items()}
    assert rows == [
        [
            "base",
            "lr02",
            "2, 3",
            signed["dev"],
            signed["test"],
            interval(diffs["dev"]),
            interval(diffs["test"]),
        ]
    ]


def test_groups_by_config_not_by_folder_name(runs, capsys, tmp_path):
    """Folders named 1..5 in any order: the config (without seed and output_dir) still makes the groups."""
    copies = []
    for n, name in enumerate(["lr02_seed3", "base_seed1", "base_seed3", "lr02_seed2", "base_seed2"]):
        copies.append(tmp_path / str(n) / "run")
        shutil.copytree(runs[name], copies[-1])
    _, out, _ = compare(capsys, *copies)
    rows = find(tables(out), "Entity F1")[1:]
    assert [r[:3] for r in rows] == [["optim.lr=0.02", "2", "2, 3"], ["optim.lr=0.01", "3", "1, 2, 3"]]


def test_same_config_on_other_data_is_another_group(runs, capsys, tmp_path):
    other = tmp_path / "other_seed1"
    shutil.copytree(runs["base_seed1"], other)
    for ckpt in (other / "checkpoints").iterdir():  # the same config trained on other data files
        checkpoint = torch.load(ckpt, weights_only=True)
        checkpoint["ner_app_run"]["data"] = "f" * 64
        torch.save(checkpoint, ckpt)
    _, out, _ = compare(capsys, runs["base_seed1"], runs["base_seed2"], runs["base_seed3"], other)
    t = tables(out)
    rows = find(t, "Entity F1")[1:]
    assert [r[:3] for r in rows] == [["base", "3", "1, 2, 3"], ["other", "1", "1"]]
    assert rows[1][3:] == [by_hand([f1(other, "dev")]), by_hand([f1(other, "test")])]  # one run: no std
    differs = find(t, "What differs")
    assert differs[0] == ["config", "data"] and differs[2] == ["other", "ffffffff"]


def test_a_run_without_checkpoints_joins_its_config(runs, capsys, tmp_path):
    bare = tmp_path / "base_seed2"
    shutil.copytree(runs["base_seed2"], bare, ignore=shutil.ignore_patterns("checkpoints"))
    _, out, _ = compare(capsys, runs["base_seed1"], bare, runs["base_seed3"])
    assert [r[:3] for r in find(tables(out), "Entity F1")[1:]] == [["base", "3", "1, 2, 3"]]


def test_html_page_has_the_tables_and_an_embedded_chart(runs, capsys, tmp_path):
    page = tmp_path / "compare.html"
    code, out, _ = compare(capsys, *runs.values(), "--html", page)
    assert code == 0
    html = page.read_text(encoding="utf-8")
    png = re.search(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)
    assert png is not None
    from PIL import Image

    image = Image.open(io.BytesIO(base64.b64decode(png.group(1))))
    assert image.format == "PNG" and image.size[0] > 300 and image.size[1] > 200
    assert not re.search(r"(src|href)=\"(?!data:)", html)  # nothing fetched from outside
    parser = HtmlTables()
    parser.feed(html)
    assert parser.tables == tables(out)  # the page holds exactly the Markdown's tables
    # no temporary file left; the page and its marker (docs/reliability.md#the-output-policy)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".compare.html.ner-app", "compare.html"]


class HtmlTables(HTMLParser):
    """caption -> rows (header first) of every <table>, cells as text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: dict[str, list[list[str]]] = {}
        self._caption: str | None = None
        self._cell: str | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "caption":
            self._caption = ""
        elif tag == "tr":
            self.tables[self._title].append([])
        elif tag in ("td", "th"):
            self._cell = ""

    def handle_endtag(self, tag):
        if tag == "caption":
            self._title, self._caption = self._caption, None
            self.tables[self._title] = []
        elif tag in ("td", "th"):
            self.tables[self._title][-1].append(self._cell)
            self._cell = None

    def handle_data(self, data):
        if self._caption is not None:
            self._caption += data
        elif self._cell is not None:
            self._cell += data


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path.parent


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda t, r: t / "missing", "missing: no such folder, expected a run folder"),
        (lambda t, r: write(t / "f" / "x", "") / "x", "x: is a file, expected a run folder"),
        (lambda t, r: t, "not a run folder (no metrics.json or config.yaml)"),
        (
            lambda t, r: write(t / "u" / "config.yaml", "seed: 1\n"),
            "u: no metrics.json, the run has not finished",
        ),
        (
            lambda t, r: write(t / "p" / "metrics.json", '{"heldout": {}, "steps": 3}'),
            "metrics.json: expected the dev and test scores of a train.py run, found heldout, steps",
        ),
        (lambda t, r: write(t / "j" / "metrics.json", '{"dev": '), "metrics.json:1: not valid JSON"),
        (
            lambda t, r: write(t / "n" / "metrics.json", '{"dev": {"f1": "high"}, "test": {"f1": 1}}'),
            "metrics.json: dev.f1: expected a number, found 'high'",
        ),
        (
            lambda t, r: write(t / "i" / "metrics.json", '{"dev": {"f1": NaN}, "test": {"f1": 1}}'),
            "metrics.json: dev.f1: expected a finite number, found nan",
        ),
        (
            lambda t, r: write(t / "k" / "metrics.json", '{"dev": {"f1": 1e200}, "test": {"f1": 1}}'),
            "metrics.json: dev.f1: expected a number from 0 to 100, found 1e+200",
        ),
        (
            lambda t, r: write(
                t / "m" / "metrics.json", '{"dev": {"f1": 1}, "test": {"f1": 1}, "elmo_mix": {}}'
            ),
            "metrics.json: elmo_mix: expected a list of {softmax_w, gamma} mappings",
        ),
        (
            lambda t, r: write(
                t / "g" / "metrics.json",
                '{"dev": {"f1": 1}, "test": {"f1": 1}, "elmo_mix": [{"softmax_w": [1], "gamma": null}]}',
            ),
            "metrics.json: elmo_mix[0].gamma: expected a number, found None",
        ),
        (
            lambda t, r: write(
                t / "h" / "metrics.json", '{"dev": {"f1": 1}, "test": {"f1": 1}, "bilm_fingerprint": "ab"}'
            ),
            "metrics.json: bilm_fingerprint: expected 64 hex digits (a sha256), found 'ab'",
        ),
        (lambda t, r: shutil.copytree(r["base_seed1"], t / "again"), "two runs of one config with seed 1"),
    ],
)
def test_bad_input_is_one_line_naming_the_path(runs, capsys, tmp_path, make, message):
    path = make(tmp_path, runs)
    code, out, err = compare(capsys, runs["base_seed1"], path)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("error: ") and message in err, err


def test_paths_show_relative_to_the_project(runs, capsys, tmp_path):
    """Record folders inside a project: a path key that differs reads as the configs write it, not absolute."""
    project, shared = tmp_path / "project", tmp_path / "shared"
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    folders = {"inside": project / "data" / "conll", "beside": shared / "conll"}
    records = []
    for name, data_dir in folders.items():
        shutil.copytree(ROOT / "tests/data/tiny_conll", data_dir)
        record = project / "results" / f"{name}_seed1"
        shutil.copytree(runs["base_seed1"], record)
        config = record / "config.yaml"
        config.write_text(re.sub(r"(?m)^  dir: .*$", f"  dir: {data_dir}", config.read_text()))
        records.append(record)
    _, out, _ = compare(capsys, *records)
    differs = find(tables(out), "What differs")
    assert differs == [["config", "data.dir"], ["inside", "data/conll"], ["beside", "../shared/conll"]]


def test_metrics_hold_the_chosen_checkpoints_mix(runs):
    """metrics.json "elmo_mix" equals the mix of the exported (best) weights, read back from safetensors."""
    from ner_app.report.run_files import read_elmo_mixes

    for folder in runs.values():
        recorded = json.loads((folder / "metrics.json").read_text())["elmo_mix"]
        exported, _ = read_elmo_mixes(folder)
        assert len(recorded) == len(exported) == 1
        assert recorded[0]["softmax_w"] == pytest.approx(exported[0].softmax_w, abs=1e-7)
        assert recorded[0]["gamma"] == pytest.approx(exported[0].gamma, abs=1e-7)
        assert sum(recorded[0]["softmax_w"]) == pytest.approx(1.0, abs=1e-6)


def test_mix_table_equals_numbers_by_hand(runs, capsys):
    _, out, _ = compare(capsys, *runs.values())
    header, *rows = find(tables(out), "Learned ELMo mix")
    layers = len(json.loads((runs["base_seed1"] / "metrics.json").read_text())["elmo_mix"][0]["softmax_w"])
    assert header == ["config", "runs", *(f"layer {j}" for j in range(layers)), "gamma"]

    def three(values: list[float]) -> str:
        mean = sum(values) / len(values)
        std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
        return f"{mean:.3f} ± {std:.3f}"

    for row in rows:
        mixes = [
            json.loads((runs[f"{row[0]}_seed{s}"] / "metrics.json").read_text())["elmo_mix"][0]
            for s in RECIPES[row[0]][1]
        ]
        assert row[1] == str(len(mixes))
        assert row[2:-1] == [three([m["softmax_w"][j] for m in mixes]) for j in range(layers)]
        assert row[-1] == three([m["gamma"] for m in mixes])


def test_runs_without_a_recorded_mix_leave_the_mix_table_out(runs, capsys, tmp_path):
    """Baseline runs, or runs from before metrics.json held the mix: no mix table, the rest unchanged."""
    copies = []
    for name in ("base_seed1", "base_seed2"):
        copies.append(tmp_path / name)
        shutil.copytree(runs[name], copies[-1])
        metrics = json.loads((copies[-1] / "metrics.json").read_text())
        del metrics["elmo_mix"]
        (copies[-1] / "metrics.json").write_text(json.dumps(metrics))
    _, out, _ = compare(capsys, *copies)
    assert "Learned ELMo mix" not in out and "Entity F1" in out


def test_metrics_name_the_bilm_by_its_weights(runs):
    """metrics.json "bilm_fingerprint" is the fingerprint of the biLM files the run read."""
    from ner_app.bilm.weights import load_bilm
    from ner_app.train.layer_cache import bilm_fingerprint

    tiny = ROOT / "tests/data/tiny_bilm"
    expected = bilm_fingerprint(load_bilm(tiny / "options.json", tiny / "weights.hdf5"))
    for folder in runs.values():
        assert json.loads((folder / "metrics.json").read_text())["bilm_fingerprint"] == expected


def with_bilm(run: Path, copy: Path, bilm: Path, fingerprint: str | None = "keep") -> Path:
    """A copy of ``run`` whose config reads the biLM from ``bilm``; its metrics' fingerprint kept, set or removed."""
    shutil.copytree(run, copy)
    config = copy / "config.yaml"
    text = re.sub(r"(?m)^  options: .*$", f"  options: {bilm / 'options.json'}", config.read_text())
    config.write_text(re.sub(r"(?m)^  weights: .*$", f"  weights: {bilm / 'weights.hdf5'}", text))
    metrics = json.loads((copy / "metrics.json").read_text())
    if fingerprint is None:
        del metrics["bilm_fingerprint"]
    elif fingerprint != "keep":
        metrics["bilm_fingerprint"] = fingerprint
    (copy / "metrics.json").write_text(json.dumps(metrics))
    return copy


def test_a_moved_bilm_stays_one_group_a_replaced_one_does_not(runs, capsys, tmp_path):
    """Grouped by the biLM's weights: the same files under another path are one recipe; other weights under the
    same path are another. Without a fingerprint (records from before it), the paths decide."""
    moved = tmp_path / "moved_bilm"
    shutil.copytree(ROOT / "tests/data/tiny_bilm", moved)
    seed2 = with_bilm(runs["base_seed2"], tmp_path / "a" / "base_seed2", moved)
    seed3 = with_bilm(runs["base_seed3"], tmp_path / "a" / "base_seed3", moved)
    _, out, _ = compare(capsys, runs["base_seed1"], seed2, seed3)
    assert [r[:3] for r in find(tables(out), "Entity F1")[1:]] == [["base", "3", "1, 2, 3"]]

    other = with_bilm(
        runs["base_seed1"], tmp_path / "b" / "other_seed1", ROOT / "tests/data/tiny_bilm", "e" * 64
    )
    _, out, _ = compare(capsys, runs["base_seed1"], runs["base_seed2"], other)
    t = tables(out)
    assert [r[:3] for r in find(t, "Entity F1")[1:]] == [["base", "2", "1, 2"], ["other", "1", "1"]]
    assert find(t, "What differs")[0] == ["config", "elmo.bilm"]
    assert find(t, "What differs")[2] == ["other", "e" * 12]

    old2 = with_bilm(runs["base_seed2"], tmp_path / "c" / "old_seed2", moved, None)
    _, out, _ = compare(capsys, runs["base_seed1"], old2)
    assert [r[:3] for r in find(tables(out), "Entity F1")[1:]] == [["base", "1", "1"], ["old", "1", "2"]]


def test_per_seed_differences_by_hand(runs, capsys):
    _, out, _ = compare(capsys, *runs.values())
    header, *rows = find(tables(out), "Paired by seed, each seed", keys=3)
    assert header == ["A", "B", "seed", "dev ΔF1", "test ΔF1"]
    expected = [
        [
            "base",
            "lr02",
            str(n),
            *(f"{f1(runs[f'lr02_seed{n}'], s) - f1(runs[f'base_seed{n}'], s):+.2f}" for s in ("dev", "test")),
        ]
        for n in (2, 3)
    ]
    assert rows == expected


@pytest.mark.parametrize(
    ("df", "expected"), [(1, 12.7062), (2, 4.3027), (4, 2.7764), (9, 2.2622), (29, 2.0452)]
)
def test_t_quantiles_match_the_printed_tables(df, expected):
    """Two-sided 95% points of Student's t as printed in statistics tables (4 decimals)."""
    from ner_app.report.student_t import t_quantile

    assert t_quantile(0.975, df) == pytest.approx(expected, abs=6e-5)


def test_t_quantile_oracle_by_sampling():
    """A brute-force check: the 95% point of 200,000 draws of a t with 3 degrees of freedom."""
    from ner_app.report.student_t import t_quantile

    torch.manual_seed(0)
    draws = torch.distributions.StudentT(3.0).sample((200_000,)).abs()
    share = (draws <= t_quantile(0.975, 3)).double().mean().item()
    assert share == pytest.approx(0.95, abs=0.003)


def test_record_folders_named_by_seed_take_their_parents_name(runs, capsys, tmp_path):
    """results/<arm>/seedN, as the long runs' records are kept: groups are named after <arm>."""
    records = []
    for name in ("base_seed1", "base_seed2", "lr02_seed2"):
        arm, seed = name.split("_")
        records.append(tmp_path / f"arm_{arm}" / seed)
        shutil.copytree(runs[name], records[-1])
    _, out, _ = compare(capsys, *records)
    assert [r[:3] for r in find(tables(out), "Entity F1")[1:]] == [
        ["arm_base", "2", "1, 2"],
        ["arm_lr02", "1", "2"],
    ]


def test_chart_axis_is_fitted_to_the_scores(runs):
    """A 0.15-point difference between two configs spans over a third of the axis, not 0.15 % of 0-100."""
    from ner_app.report.charts import seed_scores
    from ner_app.report.compare import group_runs, read_run
    from ner_app.report.compare_html import f1_chart

    scores = {"dev": [[91.00, 91.04], [91.15, 91.19]], "test": [[91.02, 91.06], [91.17, 91.21]]}
    low, high = seed_scores(["a", "b"], scores).axes[0].get_ylim()
    values = [v for split in scores.values() for group in split for v in group]
    assert low < min(values) and max(values) < high  # every seed's dot is inside
    assert 0.15 / (high - low) > 0.3  # on a 0-100 axis it was 0.0015 of it
    groups = group_runs(read_run(f) for f in runs.values())
    low, high = f1_chart(groups).axes[0].get_ylim()
    shown = [r.f1[s] for g in groups for r in g.runs for s in ("dev", "test")]
    assert (
        low <= min(shown) and max(shown) <= high and 0 <= low
    )  # (an F1 of 0 sits on the axis, not below it)
    assert high - low < 1.5 * (max(shown) - min(shown)) + 1  # fitted: a margin, not the 0-100 range


def test_every_recorded_run_reads_and_writes_back_unchanged(tmp_path):
    """results/*/seed*/metrics.json, from every version that wrote one: read, checked, and written back
    byte for byte (train.py writes metrics.json with RunMetrics.write)."""
    from ner_app.train.metrics import RunMetrics

    records = sorted(ROOT.glob("results/*/seed*/metrics.json"))
    assert records, "no records under results/"
    for path in records:
        metrics = RunMetrics.read(path)
        assert metrics.to_json() == json.loads(path.read_text())
        assert metrics.write(tmp_path / "metrics.json").read_bytes() == path.read_bytes(), path


def test_many_configs_are_each_paired_with_the_first_not_with_every_other():
    """500 configs would be 124,750 pairs (tens of MB of table); beyond 12, each is paired with the first."""
    from ner_app.report.compare import Group, Run
    from ner_app.report.compare_tables import MAX_ALL_PAIRS, paired_table, per_seed_table

    def group(k: int, n_runs: int = 2) -> Group:
        runs = tuple(
            Run(
                Path(f"g{k}s{s}"),
                s,
                (("optim.lr", k),),
                None,
                {"dev": 90.0 + k + s, "test": 88.0 + k},
                {"dev": {}, "test": {}},
            )
            for s in range(1, n_runs + 1)
        )
        return Group(f"lr={k}", runs)

    few = [group(k) for k in range(3)]
    assert len(paired_table(few).rows) == 3 and "each against the first" not in paired_table(few).title
    many = [group(k) for k in range(MAX_ALL_PAIRS + 3)]
    table = paired_table(many)
    assert len(table.rows) == len(many) - 1 and "each against the first" in table.title
    assert {row[0] for row in table.rows} == {"lr=0"}
    assert len(per_seed_table(many).rows) == 2 * (len(many) - 1)
