"""The run report's learning curves (every epoch, the last included) and its colours (the palette of the
predictions page of the same model), on real tiny runs; the pages read with ``test_report``'s parser."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest

import train
from ner_app.cli.commands import main
from ner_app.report import charts
from ner_app.report.page import type_colours
from ner_app.report.run_files import learning_curves, read_log
from tests.report.test_report import ROOT, TINY, parse


@pytest.mark.system
@pytest.mark.parametrize("epochs", [1, 3])
def test_every_epoch_has_its_dev_point(tmp_path: Path, epochs: int) -> None:
    """The last epoch's validation is shown (only the one after fit, on the chosen checkpoint, is not), and a
    logging interval larger than the data (50 steps, 3 batches an epoch) follows the data size: every epoch
    logs its steps and Lightning does not warn."""
    run = tmp_path / "run"
    args = [
        "--config",
        str(ROOT / "configs/tiny.yaml"),
        f"output_dir={run}",
        f"data.dir={TINY}",
        "elmo.enabled=false",
        f"trainer.max_epochs={epochs}",
        "trainer.log_every_n_steps=50",
        "trainer.threads=1",
    ]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert train.main(args) == 0
    assert not [w for w in caught if "log_every_n_steps" in str(w.message)]
    rows = read_log(run)
    assert {int(r["epoch"]) for r in rows if "train_loss" in r} == set(range(epochs))
    validations = [r for r in rows if "val_f1" in r]
    assert len(validations) == epochs + 1  # one per epoch, then the one after fit
    loss, dev, speed = learning_curves(rows)
    assert list(dev) == list(loss) == list(speed) == list(range(1, epochs + 1))
    assert [dev[e]["f1"] for e in dev] == [r["val_f1"] for r in validations[:epochs]]
    page = parse(run / "report.html")
    assert f"{epochs} epoch{'s' * (epochs > 1)} trained;" in "".join(page.text["summary"])
    curves = "".join(page.text["learning-curves"])
    figure = charts.learning_curves(loss, dev, speed)
    if epochs < charts.MIN_POINTS:  # too few points for a line: each curve is one line of text
        assert figure is None
        f1 = validations[0]["val_f1"]
        assert (
            f"Dev entity scores: epoch 1: F1 {f1:.2f}, precision " in curves
            and "(not drawn: fewer than 3 epochs)" in curves
        )
        return
    assert "(not drawn: fewer than" not in curves
    f1_line = next(line for line in figure.axes[1].lines if line.get_label() == "f1")
    assert list(f1_line.get_xdata()) == [1, 2, 3]  # the dev F1 curve has every epoch's point
    assert list(f1_line.get_ydata()) == [r["val_f1"] for r in validations[:epochs]]


COLOUR_RULE = re.compile(
    r'mark\[data-type="([^"]+)"\] \{ background: (#[0-9a-f]{6}); border-color: (#[0-9a-f]{6}); \}'
)


def colour_rules(html: str) -> dict[str, tuple[str, str]]:
    return {kind: (fill, border) for kind, fill, border in COLOUR_RULE.findall(html)}


def predictions_page(capsys, export: Path, tmp_path: Path) -> str:
    """``predict --format html`` of the export on two lines of text (a real run of the command)."""
    text = tmp_path / "text.txt"
    text.write_text("Alice Smith flew to Paris .\nAcme Corp hired Bob Jones in Berlin .\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["predict", "--model", str(export), "--input", str(text), "--format", "html"]) == 0
    return capsys.readouterr().out


def test_report_and_predictions_page_share_one_palette(tiny_run: Path, tmp_path: Path, capsys) -> None:
    """Each type has one colour on a run's report and on its export's predictions page: CoNLL's types, and
    other types too, when the report also shows a gold type the model never learnt (it sorts among them)."""
    report = (tiny_run / "report.html").read_text(encoding="utf-8")
    predictions = predictions_page(capsys, tiny_run / "export", tmp_path)
    assert colour_rules(report) == colour_rules(predictions) == type_colours(["LOC", "MISC", "ORG", "PER"])
    marked = re.findall(r'<mark data-type="([^"]+)"', report)  # the report's entities carry their type
    assert marked and set(marked) <= set(colour_rules(report))

    # A model of other types, one of which (BEE, MISC's entity in train) its report never shows: the report's
    # types are not the model's, yet each must keep the colour the model's predictions page gives it.
    data = tmp_path / "data"
    data.mkdir()
    for name in ("train", "valid", "test"):
        text = (TINY / f"{name}.txt").read_text().replace("-PER", "-ANIMAL").replace("-ORG", "-FOOD")
        (data / f"{name}.txt").write_text(text.replace("I-MISC", "I-BEE" if name == "train" else "O"))
    run = tmp_path / "run"
    args = [
        "--config",
        str(ROOT / "configs/tiny.yaml"),
        f"output_dir={run}",
        f"data.dir={data}",
        "elmo.enabled=false",
        "trainer.max_epochs=4",
        "trainer.threads=1",
    ]
    assert train.main(args) == 0
    for split in ("dev", "test"):  # and no BEE predicted on dev or test either
        path = run / f"predictions_{split}.conll"
        path.write_text(re.sub(r"\b[BIES]-BEE$", "O", path.read_text(), flags=re.M))
    assert main(["report", str(run)]) == 0
    report = (run / "report.html").read_text(encoding="utf-8")
    shown = set(re.findall(r'<mark data-type="([^"]+)"', report))
    assert shown and "BEE" not in shown and shown <= {"ANIMAL", "FOOD", "LOC"}
    in_predictions = colour_rules(predictions_page(capsys, run / "export", tmp_path))
    assert set(in_predictions) == {"ANIMAL", "BEE", "FOOD", "LOC"}  # the model's types
    assert colour_rules(report) == in_predictions
