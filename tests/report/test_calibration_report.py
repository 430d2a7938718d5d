"""The run report's calibration section: the ECE table and the reliability diagram from calibration.json."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from ner_app.errors import NerAppError
from ner_app.report.calibration_report import calibration_section, read_calibration


def test_the_section_shows_the_run_s_numbers_and_a_diagram(tiny_run: Path) -> None:
    data = json.loads((tiny_run / "calibration.json").read_text())
    html = (tiny_run / "report.html").read_text()  # written by train.py itself
    section = re.search(r'<section id="calibration">.*?</section>', html, re.S)
    assert section is not None
    text = section.group(0)
    assert f"Temperature {data['temperature']:.3f}" in text and text.count("data:image/png;base64,") == 1
    for split in ("dev", "test"):
        for when in ("before", "after"):
            assert f"{data[split][when]['ece']:.4f}" in text


def test_a_run_without_calibration_says_so(tmp_path: Path) -> None:
    assert read_calibration(tmp_path) is None
    assert "This run has no calibration" in calibration_section(tmp_path)


def test_a_malformed_record_is_one_line_naming_the_file(tiny_run: Path, tmp_path: Path) -> None:
    shutil.copy(tiny_run / "calibration.json", tmp_path / "calibration.json")
    data = json.loads((tmp_path / "calibration.json").read_text())
    del data["test"]["after"]["bins"]
    (tmp_path / "calibration.json").write_text(json.dumps(data))
    with pytest.raises(NerAppError, match=r"calibration.json: not the calibration record of a train.py run"):
        calibration_section(tmp_path)
