"""metrics.json's ``previous_dev`` (a continued run's old types before and after): an exact round trip, a malformed
value named by its key, and the report's table computed by hand."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ner_app.errors import NerAppError
from ner_app.report.forgetting import forgetting_section
from ner_app.text.scores import entity_scores
from ner_app.train.metrics import PreviousDev, RunMetrics, SplitScores

GOLD = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O", "B-MISC"]]
BEFORE = SplitScores.of(entity_scores(GOLD, GOLD))
# after: LOC missed, MISC read as a new type PROD
AFTER = SplitScores.of(entity_scores(GOLD, [["B-PER", "I-PER", "O", "O"], ["B-ORG", "O", "B-PROD"]]))
RECORD = PreviousDev("/data/old/valid.txt", ("LOC", "MISC", "ORG", "PER"), BEFORE, AFTER)


def test_previous_dev_round_trips_and_older_records_have_none(tmp_path: Path) -> None:
    metrics = RunMetrics(BEFORE, BEFORE, previous_dev=RECORD)
    path = metrics.write(tmp_path / "metrics.json")
    assert RunMetrics.read(path) == metrics
    saved = json.loads(path.read_text())
    assert saved["previous_dev"]["types"] == ["LOC", "MISC", "ORG", "PER"]
    assert saved["previous_dev"]["after"]["per_type"]["LOC"]["f1"] == 0.0
    assert RunMetrics(BEFORE, BEFORE).to_json().keys() == {"dev", "test"}  # without it: the file as before
    assert RunMetrics.from_json({"dev": saved["dev"], "test": saved["test"]}, "m").previous_dev is None


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda p: p["after"]["per_type"]["PER"].update(f1="x"),
            "previous_dev.after.per_type.PER.f1: expected a number",
        ),
        (lambda p: p.update(types="PER"), "previous_dev.types"),
        (lambda p: p.pop("before"), "previous_dev.before: missing"),
    ],
)
def test_malformed_previous_dev_is_one_line_naming_the_key(tmp_path: Path, edit, message: str) -> None:  # noqa: ANN001
    data = RunMetrics(BEFORE, BEFORE, previous_dev=RECORD).to_json()
    edit(data["previous_dev"])
    (tmp_path / "metrics.json").write_text(json.dumps(data))
    with pytest.raises(NerAppError, match=re.escape(message)) as err:
        RunMetrics.read(tmp_path / "metrics.json")
    assert str(err.value).startswith(str(tmp_path / "metrics.json")) and "\n" not in str(err.value)


def test_the_section_holds_each_old_type_before_and_after() -> None:
    html = forgetting_section(RECORD)
    rows = re.findall(r"<tr><td>(\w+)</td>((?:<td class=\"num\">[^<]*</td>)+)</tr>", html)
    cells = {name: re.findall(r">([^<]*)<", values)[::2] for name, values in rows}
    # by hand: every type 100 before; after: LOC missed (0), MISC missed (0), ORG and PER found (100)
    assert cells["LOC"] == ["100.00", "0.00", "-100.00", "1"]
    assert cells["MISC"] == ["100.00", "0.00", "-100.00", "1"]
    assert cells["ORG"] == ["100.00", "100.00", "+0.00", "1"]
    assert cells["PER"] == ["100.00", "100.00", "+0.00", "1"]
    # all: 2 of 4 gold found, 2 of 3 predicted right: P 66.67, R 50, F1 57.14
    assert cells["all"] == ["100.00", "57.14", "-42.86", "4"]
    assert "PROD" not in cells and "valid.txt" in html and "<img" in html
