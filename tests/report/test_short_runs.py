"""The learning curves of short runs, in a real browser: a 1-epoch run and a 5-batch run (5 epochs of one batch).
A curve of fewer than 3 epochs is one line of text, never a line of two points or empty axes; a drawn one has
whole-epoch ticks numbered from 1, as the console numbers epochs. Headless chromium renders each report; the
5-batch run's curves are found pixel for pixel in its screenshot, and each panel there shows its curve."""

from __future__ import annotations

import base64
import io
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import train
from ner_app.report import charts
from ner_app.report.page import png_uri
from ner_app.report.run_files import learning_curves, read_log
from tests.report.test_report import ROOT, TINY, parse

LINE_COLOURS = {"loss": (0x1F, 0x77, 0xB4), "dev": (0xD6, 0x27, 0x28)}  # tab:blue, tab:red (F1)


def browser() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("no chromium on PATH (Debian: apt-get install chromium; .ci/run installs it)")
    return found


def chromium(page: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [
        browser(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--force-device-scale-factor=1",
        f"--user-data-dir={tmp_path / 'profile'}",
        *args,
        page.as_uri(),
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    return result


def screenshot(page: Path, tmp_path: Path) -> np.ndarray:
    """The page as chromium draws it in a 1200 x 1600 window: (H, W, 3) RGB."""
    shot = tmp_path / "shot.png"
    chromium(page, tmp_path, "--window-size=1200,1600", f"--screenshot={shot}")
    return np.asarray(Image.open(shot).convert("RGB"))


def rendered_section(page: Path, tmp_path: Path, anchor: str) -> str:
    """The markup of one section of the DOM chromium built from the page (``--dump-dom``)."""
    dom = chromium(page, tmp_path, "--dump-dom").stdout
    match = re.search(rf'<section id="{anchor}">(.*?)</section>', dom, re.S)
    assert match, dom[:2000]
    return match.group(1)


def embedded_images(html: str) -> list[np.ndarray]:
    uris = re.findall(r'<img src="data:image/png;base64,([^"]+)"', html)
    return [np.asarray(Image.open(io.BytesIO(base64.b64decode(u))).convert("RGB")) for u in uris]


def locate(shot: np.ndarray, image: np.ndarray, colour: tuple[int, int, int]) -> tuple[int, int]:
    """Where ``image`` lies, pixel for pixel, in ``shot``: its first pixel of ``colour`` anchors the search."""
    ys, xs = np.nonzero((image == colour).all(axis=2))
    assert len(ys), "the image has no pixel of that colour"
    h, w = image.shape[:2]
    for sy, sx in zip(*np.nonzero((shot == colour).all(axis=2)), strict=True):
        top, left = sy - ys[0], sx - xs[0]
        if 0 <= top <= shot.shape[0] - h and 0 <= left <= shot.shape[1] - w:
            if np.array_equal(shot[top : top + h, left : left + w], image):
                return int(top), int(left)
    raise AssertionError("the chart is not on the screen as embedded")


def train_run(run: Path, *overrides: str) -> None:
    args = [
        "--config",
        str(ROOT / "configs/tiny.yaml"),
        f"output_dir={run}",
        f"data.dir={TINY}",
        "elmo.enabled=false",
        "trainer.threads=1",
        *overrides,
    ]
    assert train.main(args) == 0


@pytest.mark.system
@pytest.mark.slow
def test_five_batch_run_has_whole_epoch_ticks_and_no_empty_axes(tmp_path: Path) -> None:
    run = tmp_path / "run"
    train_run(run, "data.batch_size=8", "trainer.max_epochs=5")  # the 6 training sentences in one batch
    rows = read_log(run)
    assert sorted(int(r["epoch"]) for r in rows if "train_loss" in r) == [0, 1, 2, 3, 4]  # one batch each
    loss, dev, speed = learning_curves(rows)
    assert list(loss) == list(dev) == [1, 2, 3, 4, 5] and speed == {}  # no epoch with two timed batches

    # The figure the report embeds: two panels, no throughput axes; whole epochs 1..5 on both
    figure = charts.learning_curves(loss, dev, speed)
    assert figure is not None and [ax.get_title() for ax in figure.axes] == [
        "train loss per token (epoch mean)",
        "dev entity scores (%)",
    ]
    figure.canvas.draw()
    for ax in figure.axes:
        low, high = ax.get_xlim()
        ticks = [
            (t, label.get_text()) for t, label in zip(ax.get_xticks(), ax.get_xticklabels(), strict=True)
        ]
        assert [(t, text) for t, text in ticks if low <= t <= high] == [(e, str(e)) for e in range(1, 6)]
        assert all(len(line.get_xdata()) == 5 for line in ax.lines)
    html = (run / "report.html").read_text(encoding="utf-8")
    curves_html = html[html.index('<section id="learning-curves">') :].split("</section>")[0]
    drawn = embedded_images(curves_html)
    assert len(drawn) == 1
    expected = embedded_images(f'<img src="{png_uri(figure)}"')[0]
    assert np.array_equal(drawn[0], expected)  # the page shows this very figure
    text = "".join(parse(run / "report.html").text["learning-curves"])
    assert "Training throughput: not measured: no epoch logged two training steps." in text

    # In the browser: the chart is on screen as embedded, and each panel's area holds its curve's colour
    shot = screenshot(run / "report.html", tmp_path)
    top, left = locate(shot, drawn[0], LINE_COLOURS["dev"])
    height = drawn[0].shape[0]
    for ax, name in zip(figure.axes, ("loss", "dev"), strict=True):
        box = ax.get_window_extent()  # pixels from the figure's bottom left
        y0, y1 = top + height - int(box.y1), top + height - int(box.y0)
        area = shot[y0:y1, left + int(box.x0) : left + int(box.x1)]
        assert (area == LINE_COLOURS[name]).all(axis=2).sum() > 20, name
    assert rendered_section(run / "report.html", tmp_path, "learning-curves").count("<img") == 1


def test_one_epoch_run_writes_its_curves_as_lines(tmp_path: Path) -> None:
    run = tmp_path / "run"
    train_run(run, "trainer.max_epochs=1")
    loss, dev, speed = learning_curves(read_log(run))
    assert list(loss) == list(dev) == list(speed) == [1]
    assert charts.learning_curves(loss, dev, speed) is None  # nothing to draw: no single dots on axes
    section = rendered_section(run / "report.html", tmp_path, "learning-curves")  # as chromium built it
    assert "<img" not in section
    lines = re.findall(r"<p>([^<]*)</p>", section)
    assert [line.split(":")[0] for line in lines] == [
        "Train loss per token",
        "Dev entity scores",
        "Training throughput",
    ]
    assert lines[0] == f"Train loss per token: epoch 1: {loss[1]:.4g} (not drawn: fewer than 3 epochs)."
    assert all(line.endswith("(not drawn: fewer than 3 epochs).") for line in lines)
    # the rest of the page is drawn: its other charts are on screen, and no image is broken or blank
    shot = screenshot(run / "report.html", tmp_path)
    assert len({tuple(p) for p in shot.reshape(-1, 3)[::7]}) > 50
    # per-type F1 (when any is above 0: bars of height 0 are empty axes) and two confusion matrices (no ELMo)
    metrics = json.loads((run / "metrics.json").read_text())
    found = any(s["f1"] for split in ("dev", "test") for s in metrics[split]["per_type"].values())
    assert len(parse(run / "report.html").images) == 2 + found
    per_type = rendered_section(run / "report.html", tmp_path, "per-type")
    assert ("<img" in per_type) == found
    assert ("0.00 for every type on dev and test, so no chart is drawn" in per_type) == (not found)


@pytest.mark.parametrize("epochs", [2, 3, 34])
def test_curves_of_fewer_than_three_epochs_are_not_drawn_and_ticks_are_whole(epochs: int) -> None:
    loss = {e: 10.0 / e for e in range(1, epochs + 1)}
    dev = {e: {"f1": 50.0 + e, "precision": 60.0, "recall": 40.0} for e in loss}
    speed = {e: {"sentences": 100.0, "tokens": 1500.0} for e in list(loss)[:2]}  # two epochs timed
    figure = charts.learning_curves(loss, dev, speed)
    if epochs < charts.MIN_POINTS:
        assert figure is None
        return
    assert figure is not None and len(figure.axes) == 2  # throughput (2 points) is left to a line of text
    figure.canvas.draw()
    for ax in figure.axes:
        low, high = ax.get_xlim()
        shown = [t for t in ax.get_xticks() if low <= t <= high]
        assert shown and all(t == int(t) and 1 <= t <= epochs for t in shown)
        assert low < 1 and high > epochs  # every point inside the axes


def test_per_type_scores_of_zero_are_a_line_not_empty_axes() -> None:
    from ner_app.report.run_report import _per_type_section
    from ner_app.text.scores import entity_scores
    from ner_app.train.metrics import RunMetrics, SplitScores

    gold = [["B-PER", "I-PER", "O", "B-LOC"]]
    missed = entity_scores(gold, [["O", "O", "O", "O"]])
    section = _per_type_section(RunMetrics(SplitScores.of(missed), SplitScores.of(missed)))
    assert "<img" not in section and "0.00 for every type on dev and test, so no chart is drawn" in section
    one = entity_scores(gold, [["B-PER", "I-PER", "O", "O"]])  # one type found on test: drawn
    section = _per_type_section(RunMetrics(SplitScores.of(missed), SplitScores.of(one)))
    assert section.count("<img") == 1 and "no chart is drawn" not in section
