"""The HTML run report: the error breakdown against a brute-force oracle, the report of a real tiny run parsed
and checked section by section, rendered by a real headless chromium, and one-line refusals of broken runs."""

from __future__ import annotations

import base64
import io
import json
import logging
import random
import re
import shutil
import subprocess
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pytest
import torch
from PIL import Image
from seqeval.metrics import classification_report

import train
from ner_app.cli.commands import main
from ner_app.errors import NerAppError
from ner_app.report import charts, report_after_training, write_report
from ner_app.report.error_analysis import Outcome, classify_sentence, error_breakdown, spans
from ner_app.report.page import png_uri
from ner_app.report.run_files import learning_curves, read_log
from ner_app.text.scores import entity_scores
from ner_app.train.metrics import Mix, RunMetrics, SplitScores

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "data" / "tiny_conll"
SECTIONS = {
    "summary",
    "learning-curves",
    "per-type",
    "calibration",
    "errors",
    "confusion",
    "elmo",
    "sentences",
}
PNG = b"\x89PNG\r\n\x1a\n"


# ------------------------------------------------------------------------------ the error breakdown
def brute_force(gold: list, predicted: list) -> list[Outcome]:
    """The categories of error_analysis's docstring, by comparing token sets of every pair of spans."""

    def tokens(span):
        return set(range(span[1], span[2]))

    out = []
    for g in gold:
        shared = [(len(tokens(g) & tokens(p)), -p[1], p) for p in predicted if tokens(g) & tokens(p)]
        if not shared:
            out.append(Outcome("missed", g, None))
            continue
        partner = max(shared)[2]
        if (partner[1], partner[2]) != (g[1], g[2]):
            out.append(Outcome("wrong_boundary", g, partner))
        else:
            out.append(Outcome("correct" if partner[0] == g[0] else "wrong_type", g, partner))
    out += [Outcome("spurious", None, p) for p in predicted if not any(tokens(p) & tokens(g) for g in gold)]
    return out


def test_hand_built_spans_get_the_documented_outcomes() -> None:
    # spans are (type, start, end_exclusive), text.tags' convention
    gold = [("PER", 0, 2), ("LOC", 3, 4), ("ORG", 5, 8), ("MISC", 9, 10), ("LOC", 11, 13), ("PER", 14, 15)]
    predicted = [
        ("PER", 0, 2),  # correct
        ("ORG", 3, 4),  # wrong type: same boundaries
        ("ORG", 5, 6),
        ("LOC", 6, 8),  # two inside ORG: the larger (tokens 6-7) is its partner
        ("LOC", 12, 15),  # overlaps LOC 11-12 (1 token) and PER 14 (1 token): wrong boundary both
        ("LOC", 16, 18),
    ]  # spurious; MISC 9 is missed
    expected = [
        Outcome("correct", ("PER", 0, 2), ("PER", 0, 2)),
        Outcome("wrong_type", ("LOC", 3, 4), ("ORG", 3, 4)),
        Outcome("wrong_boundary", ("ORG", 5, 8), ("LOC", 6, 8)),
        Outcome("missed", ("MISC", 9, 10), None),
        Outcome("wrong_boundary", ("LOC", 11, 13), ("LOC", 12, 15)),
        Outcome("wrong_boundary", ("PER", 14, 15), ("LOC", 12, 15)),
        Outcome("spurious", None, ("LOC", 16, 18)),
    ]
    assert classify_sentence(gold, predicted) == expected == brute_force(gold, predicted)
    # ties in overlap go to the predicted span that starts first
    assert classify_sentence([("PER", 0, 4)], [("LOC", 0, 2), ("PER", 2, 4)])[0].predicted == ("LOC", 0, 2)
    # the spans of a tag sequence are text.tags' (end-exclusive), chunked as seqeval's default mode chunks them
    assert spans(["B-PER", "I-PER", "O", "S-LOC", "I-ORG"]) == [("PER", 0, 2), ("LOC", 3, 4), ("ORG", 4, 5)]


def random_tags(rng: random.Random, length: int) -> list[str]:
    return [
        rng.choice(["O", "O", "O", "B-PER", "I-PER", "I-LOC", "B-LOC", "I-ORG", "S-ORG"])
        for _ in range(length)
    ]


def test_breakdown_matches_brute_force_and_seqeval_on_random_tags() -> None:
    rng = random.Random(0)
    gold, predicted = [], []
    for _ in range(400):
        n = rng.randint(1, 14)
        gold.append(random_tags(rng, n))
        predicted.append(random_tags(rng, n))
    result = error_breakdown(gold, predicted)
    for g, p, outcomes in zip(gold, predicted, result.sentences, strict=True):
        assert outcomes == brute_force(spans(g), spans(p))
    report = classification_report(gold, predicted, output_dict=True, zero_division=0)
    for kind, counts in result.counts.items():
        support = sum(1 for tags in gold for s in spans(tags) if s[0] == kind)
        # the four gold outcomes partition the gold entities; "correct" is seqeval's true positives
        assert sum(counts[c] for c in ("correct", "wrong_type", "wrong_boundary", "missed")) == support
        assert counts["correct"] == round(report[kind]["recall"] * support)
    labels, rows = result.matrix()
    assert sum(map(sum, rows)) == sum(
        result.totals()[c] for c in ("correct", "wrong_type", "wrong_boundary", "missed", "spurious")
    )
    assert rows[-1][-1] == 0 and labels[-1] == "none"


# ------------------------------------------------------------------------------ a real tiny run
class Page(HTMLParser):
    """Sections (id -> text and tables), every URL-bearing attribute, images and marks."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.section: str | None = None
        self.text: dict[str, list[str]] = {}
        self.tables: dict[str, list[list[list[str]]]] = {}
        self.urls: list[str] = []
        self.images: list[str] = []
        self.tags: Counter[str] = Counter()
        self.marks = 0
        self.in_cell = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags[tag] += 1
        values = dict(attrs)
        if tag == "section":
            self.section = values["id"]
            self.text[self.section], self.tables[self.section] = [], []
        elif tag == "table" and self.section:
            self.tables[self.section].append([])
        elif tag == "tr" and self.section:
            self.tables[self.section][-1].append([])
        elif tag in {"td", "th"} and self.section:
            self.tables[self.section][-1][-1].append("")
            self.in_cell = True
        elif tag == "mark":
            self.marks += 1
        if tag == "img":
            self.images.append(values["src"] or "")
        self.urls += [v or "" for k, v in attrs if k in {"src", "href", "action", "srcset", "poster", "data"}]

    def handle_data(self, data: str) -> None:
        if self.section:
            self.text[self.section].append(data)
            if self.in_cell:
                row = self.tables[self.section][-1][-1]
                row[-1] += data

    def handle_endtag(self, tag: str) -> None:
        if tag in {"td", "th"}:
            self.in_cell = False


def parse(path: Path) -> Page:
    page = Page()
    page.feed(path.read_text(encoding="utf-8"))
    page.close()
    return page


def test_tiny_run_report_is_complete_and_self_contained(tiny_run: Path) -> None:
    page = parse(tiny_run / "report.html")  # written by train.py itself
    assert set(page.text) == SECTIONS
    assert page.tags["script"] == page.tags["link"] == page.tags["iframe"] == 0
    assert page.urls and all(u.startswith("data:image/png;base64,") for u in page.urls)
    assert len(page.images) == 6  # curves, per-type F1, reliability, dev and test confusion, ELMo weights
    for uri in page.images:
        data = base64.b64decode(uri.split(",", 1)[1], validate=True)
        assert data.startswith(PNG)
        image = Image.open(io.BytesIO(data))
        image.load()
        assert image.size[0] > 100 and len(set(image.convert("L").getdata())) > 10

    metrics = json.loads((tiny_run / "metrics.json").read_text())
    errors = page.tables["errors"]
    for split, table in zip(("dev", "test"), errors, strict=True):
        header, *rows = table
        by_type = {r[0]: [int(v) for v in r[1:]] for r in rows}
        for kind, scores in metrics[split]["per_type"].items():  # correct = seqeval's true positives
            assert by_type[kind][0] == round(scores["recall"] * scores["support"] / 100)
            assert sum(by_type[kind][:4]) == scores["support"]
        assert sum(by_type["all"][1:]) > 0  # this run makes mistakes: the sections below have content

    # the ELMo weights shown are softmax(w) and gamma of the best checkpoint
    state = torch.load(tiny_run / "checkpoints/best.ckpt", weights_only=True)["state_dict"]
    w = torch.softmax(state["tagger.elmo.scalar_mixes.0.scalar_parameters"], 0).tolist()
    gamma = state["tagger.elmo.scalar_mixes.0.gamma"].item()
    header, row = page.tables["elmo"][0]
    assert header[-1] == "gamma" and row[0] == "input mix"  # the one mix of a run without elmo.at_output
    shown = [float(v) for v in row[1:]]
    assert shown == pytest.approx([*w, gamma], abs=0.006)

    wrong = Counter()  # sentences whose predicted entities are not exactly the gold ones, and how often
    for name in ("dev", "test"):
        for block in (tiny_run / f"predictions_{name}.conll").read_text().strip().split("\n\n"):
            sentence = tuple(zip(*(line.split(" ") for line in block.splitlines()), strict=True))
            wrong[sentence] += set(spans(sentence[1])) != set(spans(sentence[2]))
    wrong = +wrong
    # tiny's dev and test files are one file: every sentence with an error occurs twice, and is shown once
    assert set(wrong.values()) == {2}
    intro = f"{len(wrong)} sentences with at least one error ({2 * len(wrong)} counting repeats"
    assert intro in "".join(page.text["sentences"])
    html = (tiny_run / "report.html").read_text()
    assert html.count('<div class="sentence">') == min(len(wrong), 20)
    assert html.count("2 times, shown once: test sentence ") == min(len(wrong), 20)
    assert page.marks > 0


def test_learning_curves_have_one_point_per_trained_epoch(tiny_run: Path) -> None:
    loss, dev, speed = learning_curves(read_log(tiny_run))
    # the validation logged after fit (best checkpoint, step past the last training step) is not an epoch
    assert list(loss) == list(dev) == list(range(1, 7))  # numbered as the console numbers epochs
    assert set(speed) <= set(loss) and all(v["tokens"] > v["sentences"] > 0 for v in speed.values())


def test_tokens_are_escaped_and_output_goes_where_asked(tiny_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    path = run / "predictions_test.conll"
    hostile = '<img src="http://x/y.png">&amp;"'
    path.write_text(path.read_text().replace("Dave", hostile.replace(" ", "_")))
    assert main(["report", str(run), "--output", str(tmp_path / "out.html")]) == 0
    page = parse(tmp_path / "out.html")
    assert hostile.replace(" ", "_") in "".join(page.text["sentences"])
    assert all(u.startswith("data:") for u in page.urls)


def test_a_repeated_sentence_is_shown_once_with_its_count(tiny_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run, ignore=shutil.ignore_patterns("report.html"))
    path = run / "predictions_test.conll"
    blocks = path.read_text().strip().split("\n\n")
    first = next(
        i
        for i, b in enumerate(blocks)
        if any(line.split(" ")[1] != line.split(" ")[2] for line in b.splitlines())
    )
    path.write_text("\n\n".join([*blocks, *[blocks[first]] * 9]) + "\n")  # 9 more times at the end of test
    assert main(["report", str(run)]) == 0
    html = (run / "report.html").read_text()
    n = len(blocks)
    # test's own copy, its 9 repeats and dev's copy (tiny's dev file is its test file): the first 8 places named
    places = ", ".join([f"test sentence {first + 1}", *(f"test sentence {n + k}" for k in range(1, 8))])
    assert f"11 times, shown once: {places}, ..." in html
    assert html.count(f"test sentence {n + 1}") == 1  # in that label only: no block of its own


def test_run_without_elmo_says_so(tmp_path: Path) -> None:
    args = [
        "--config",
        str(ROOT / "configs/tiny.yaml"),
        f"output_dir={tmp_path / 'run'}",
        f"data.dir={TINY}",
        "elmo.enabled=false",
        "trainer.max_epochs=2",
        "trainer.threads=1",
    ]
    assert train.main(args) == 0
    page = parse(tmp_path / "run" / "report.html")
    assert "This run has no ELMo" in "".join(page.text["elmo"])
    # two confusion matrices, and per-type F1 when a type scores above 0; 2 epochs' curves are lines of text
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    found = any(s["f1"] for split in ("dev", "test") for s in metrics[split]["per_type"].values())
    assert len(page.images) == 2 + found


@pytest.mark.parametrize(
    "missing",
    ["metrics.json", "logs/metrics.csv", "predictions_dev.conll", "predictions_test.conll", "export"],
)
def test_incomplete_run_is_one_line_naming_the_file(
    tiny_run: Path, tmp_path: Path, capsys, missing: str
) -> None:
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run, ignore=shutil.ignore_patterns("report.html"))
    if missing == "export":  # and the checkpoint: no trained weights left to read
        shutil.rmtree(run / missing)
        (run / "checkpoints" / "best.ckpt").unlink()
    else:
        (run / missing).unlink()
    assert main(["report", str(run)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and missing.split("/")[-1] in err[0]
    assert not (run / "report.html").exists()


def test_malformed_predictions_name_file_and_line(tiny_run: Path, tmp_path: Path, capsys) -> None:
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    path = run / "predictions_dev.conll"
    lines = path.read_text().split("\n")
    lines[2] = "two columns"
    path.write_text("\n".join(lines))
    assert main(["report", str(run)]) == 2
    assert "predictions_dev.conll:3: expected 'token gold predicted'" in capsys.readouterr().err


def test_a_failed_report_does_not_fail_the_run(tiny_run: Path, tmp_path: Path, caplog) -> None:
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run, ignore=shutil.ignore_patterns("report.html", "metrics.csv"))
    with caplog.at_level(logging.WARNING, logger="ner_app"):
        assert report_after_training(run) is None
    assert "report.html not written" in caplog.text and "python -m ner_app report" in caplog.text
    assert not (run / "report.html").exists() and (run / "metrics.json").is_file()
    assert write_report(tiny_run, tmp_path / "again.html").is_file()  # the complete run still reports


def test_entity_types_with_dollar_signs_are_drawn_as_written(tiny_run: Path, tmp_path: Path) -> None:
    """matplotlib reads "$...$" as math ("$x_$" does not parse): types reach the charts as plain text."""
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run, ignore=shutil.ignore_patterns("report.html"))
    renamed = {"PER": "$x$", "LOC": "$x_$"}
    for split in ("dev", "test"):
        path = run / f"predictions_{split}.conll"
        text = path.read_text()
        for old, new in renamed.items():
            text = text.replace(f"-{old}", f"-{new}")
        path.write_text(text)
    metrics = json.loads((run / "metrics.json").read_text())
    for split in ("dev", "test"):
        per_type = metrics[split]["per_type"]
        metrics[split]["per_type"] = {renamed.get(t, t): v for t, v in per_type.items()}
    (run / "metrics.json").write_text(json.dumps(metrics))
    assert main(["report", str(run)]) == 0
    page = parse(run / "report.html")
    assert {row[0] for row in page.tables["per-type"][0][1:]} == {"$x$", "$x_$", "MISC", "ORG"}
    assert len(page.images) == 6  # the reliability diagram too
    figure = charts.per_type_scores({"dev": {"$x$": 50.0, "$x_$": 60.0}})
    labels = [label.get_text() for label in figure.axes[0].get_xticklabels()]
    assert labels == [r"\$x\$", r"\$x_\$"]  # escaped: matplotlib shows "$x$" and "$x_$" as written
    assert png_uri(figure).startswith("data:image/png;base64,")


def test_run_metrics_write_what_train_py_wrote(tmp_path: Path) -> None:
    """RunMetrics built from entity_scores and ScalarMix.learned() writes the JSON train.py always wrote."""
    scores = entity_scores(
        [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG"]], [["B-PER", "I-PER", "O", "O"], ["B-ORG"]]
    )
    mix = {"softmax_w": [0.25, 0.75], "gamma": 1.5}
    legacy = {
        "dev": dict(scores, sentences_per_s=12.5),
        "test": dict(scores, sentences_per_s=3.0),
        "elmo_mix": [mix],
        "bilm_fingerprint": "ab" * 32,
    }
    metrics = RunMetrics(SplitScores.of(scores, 12.5), SplitScores.of(scores, 3.0), (Mix.of(mix),), "ab" * 32)
    assert metrics.write(tmp_path / "metrics.json").read_text() == json.dumps(legacy, indent=2) + "\n"
    assert RunMetrics.read(tmp_path / "metrics.json") == metrics
    later = json.loads(json.dumps(legacy))  # keys of other versions, at every level, are ignored
    later["steps"], later["dev"]["seconds"], later["dev"]["per_type"]["PER"]["note"] = 3, 1.0, "x"
    later["elmo_mix"][0]["layers"] = 2
    assert RunMetrics.from_json(later, "metrics.json") == metrics
    assert metrics.split("test").per_type["LOC"].support == 1 and metrics.dev.f1 == pytest.approx(80.0)
    bare = RunMetrics(SplitScores.of(scores), SplitScores.of(scores))  # no ELMo, no speed: keys left out
    assert set(bare.to_json()) == {"dev", "test"} and "sentences_per_s" not in bare.to_json()["dev"]


def edit_metrics(run: Path, key: str, value: object) -> None:
    """Set the dotted ``key`` of the run's metrics.json (``None``: delete it)."""
    metrics = json.loads((run / "metrics.json").read_text())
    *path, last = key.split(".")
    node = metrics
    for part in path:
        node = node[int(part)] if isinstance(node, list) else node[part]
    if value is None:
        del node[last]
    elif isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    (run / "metrics.json").write_text(json.dumps(metrics))


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("dev.f1", "high", "metrics.json: dev.f1: expected a number, found 'high'"),
        ("dev.f1", 1e200, "metrics.json: dev.f1: expected a number from 0 to 100, found 1e+200"),
        ("test.precision", float("nan"), "metrics.json: test.precision: expected a finite number, found nan"),
        ("test.recall", None, "metrics.json: test.recall: missing"),
        ("dev.per_type.PER.f1", True, "metrics.json: dev.per_type.PER.f1: expected a number, found True"),
        ("dev.per_type.LOC.support", 1.5, "dev.per_type.LOC.support: expected a count (a whole number >= 0)"),
        ("dev.per_type", [], "metrics.json: dev.per_type: expected a mapping, found list"),
        ("test.sentences_per_s", -1, "metrics.json: test.sentences_per_s: expected a number >= 0, found -1"),
        (
            "elmo_mix.0.softmax_w",
            [0.5, 1e9],
            "metrics.json: elmo_mix[0].softmax_w: expected a number from 0 to 1",
        ),
        ("elmo_mix.0.gamma", "1", "metrics.json: elmo_mix[0].gamma: expected a number, found '1'"),
        ("bilm_fingerprint", 7, "metrics.json: bilm_fingerprint: expected 64 hex digits (a sha256), found 7"),
    ],
)
def test_malformed_metrics_value_is_one_line_naming_file_and_key(
    tiny_run: Path, tmp_path: Path, capsys, key: str, value: object, message: str
) -> None:
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run, ignore=shutil.ignore_patterns("report.html"))
    edit_metrics(run, key, value)
    assert main(["report", str(run)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {run / 'metrics.json'}") and message in err[0], err
    assert not (run / "report.html").exists()
    with pytest.raises(NerAppError, match=re.escape(message)):
        RunMetrics.read(run / "metrics.json")


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda b: b.replace(b"\n0,", b"\n,", 1),
            "metrics.csv:2: epoch: expected a whole number >= 0, found nothing",
        ),
        (
            lambda b: b.replace(b"\n0,", b"\ninf,", 1),
            "metrics.csv:2: epoch: expected a finite number, found 'inf'",
        ),
        (
            lambda b: b.replace(b"\n0,", b"\n0.5,", 1),
            "metrics.csv:2: epoch: expected a whole number >= 0, found '0.5'",
        ),
        (lambda b: b.replace(b"\n0,0,", b"\n0,x,", 1), "metrics.csv:2: step: expected a number, found 'x'"),
        (lambda b: b.replace(b"\n0,", b"\n0\xff,", 1), "metrics.csv:2: expected UTF-8 text, found byte 0xff"),
        (lambda b: b.rstrip(b"\r\n") + b",1\r\n", "expected 11 fields, found more"),  # with train_token_loss
    ],
)
def test_malformed_log_is_one_line_naming_file_and_line(
    tiny_run: Path, tmp_path: Path, capsys, edit, message
) -> None:
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run, ignore=shutil.ignore_patterns("report.html"))
    log = run / "logs" / "metrics.csv"
    log.write_bytes(edit(log.read_bytes()))
    assert main(["report", str(run)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and message in err[0], err


def test_predictions_that_are_not_utf8_name_the_line(tiny_run: Path, tmp_path: Path, capsys) -> None:
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run, ignore=shutil.ignore_patterns("report.html"))
    path = run / "predictions_test.conll"
    lines = path.read_bytes().split(b"\n")
    lines[4] = b"Caf\xe9 O O"
    path.write_bytes(b"\n".join(lines))
    assert main(["report", str(run)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "predictions_test.conll:5: expected UTF-8 text, found byte 0xe9" in err[0]


# ------------------------------------------------------------------------------ a real browser
def test_headless_chromium_renders_the_report(tiny_run: Path, tmp_path: Path) -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("no chromium on PATH (Debian: apt-get install chromium; .ci/run installs it)")
    shot = tmp_path / "shot.png"
    command = [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--window-size=1200,2000",
        f"--screenshot={shot}",
        (tiny_run / "report.html").as_uri(),
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and shot.is_file(), result.stderr[-2000:]
    assert shot.read_bytes().startswith(PNG)
    image = Image.open(shot).convert("RGB")
    assert image.size == (1200, 2000)
    colours = Counter(image.getdata())
    white_share = colours[(255, 255, 255)] / (1200 * 2000)
    # text, tables and the embedded charts were drawn: many colours, and far from a blank white page
    assert len(colours) > 200 and white_share < 0.9
