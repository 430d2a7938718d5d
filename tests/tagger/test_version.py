"""The name predictions carry into the tools (``model_version``): the model's folder and the first 8 hex digits
of the weights' sha256 that its tagger.json records, read from the file's end, or from the whole file when
the record is laid out otherwise."""

from __future__ import annotations

import json
from pathlib import Path

from ner_app.predict.shipped import SHIPPED_MODEL
from ner_app.records import sha256_file
from ner_app.tagger.version import model_version, recorded_weights_sha256


def test_the_shipped_model_is_named_by_its_folder_and_weights() -> None:
    digest = sha256_file(SHIPPED_MODEL / "model.safetensors")
    assert recorded_weights_sha256(SHIPPED_MODEL / "tagger.json") == digest
    assert model_version(SHIPPED_MODEL) == f"conll2003-{digest[:8]}"


def test_a_run_export_is_named_by_its_run_and_any_layout_is_read(tmp_path: Path) -> None:
    data = json.loads((SHIPPED_MODEL / "tagger.json").read_text(encoding="utf-8"))
    export = tmp_path / "news_v2" / "export"
    export.mkdir(parents=True)
    digest = data["integrity"]["weights_sha256"]
    # the integrity record first and the file indented: not where the tail read looks, so it reads it whole
    moved = {"integrity": data["integrity"], **{k: v for k, v in data.items() if k != "integrity"}}
    (export / "tagger.json").write_text(json.dumps(moved, indent=1), encoding="utf-8")
    assert model_version(export) == f"news_v2-{digest[:8]}"
    del moved["integrity"]
    (export / "tagger.json").write_text(json.dumps(moved), encoding="utf-8")
    assert model_version(export) == "news_v2"  # no digest recorded: the name alone
