"""A calibrated copy of an ONNX folder (``ner-app calibrate --model ONNX_DIR``): the same graphs and CRF
scores, and ``onnx.json`` with the calibration record in its spec (where ``tagger.json`` keeps it in a torch
export) under a new checksum. Torch-free; the temperature itself is fitted by ``decisions/calibrate.py``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from ner_app.files import Claim, atomic_folder, claim_folder
from ner_app.onnx.manifest import MANIFEST_SUM, check_temperature, with_checksum
from ner_app.records import read_json

MANIFEST = "onnx.json"
MAX_MANIFEST_BYTES = 1 << 29  # as the predictor reads it


def write_calibrated(
    source: str | Path, output: str | Path, calibration: dict[str, Any], claim: Claim
) -> Path:
    """Copy the ONNX folder ``source`` (already loaded and checked by ``OnnxPredictor``) to ``output`` with
    ``calibration`` (``Calibration`` as a dict, its ``temperature`` checked) as ``spec.calibration``; all or
    nothing (``atomic_folder``)."""
    root, out = Path(source), Path(output)
    check_temperature(float(calibration["temperature"]), f"{out}/{MANIFEST}")
    manifest = read_json(root / MANIFEST, MAX_MANIFEST_BYTES)
    assert isinstance(manifest, dict)  # the predictor read this folder: a dict with a spec
    body = {key: value for key, value in manifest.items() if key != MANIFEST_SUM}
    body["spec"] = {**body["spec"], "calibration": calibration}
    claim_folder(out, claim)
    with atomic_folder(out, claim) as tmp:
        for name in body["sha256"]:  # the files the manifest lists: graphs and CRF scores, checked at load
            shutil.copyfile(root / name, tmp / name)
        (tmp / MANIFEST).write_text(json.dumps(with_checksum(body)) + "\n", encoding="utf-8")
    return out
