"""A training checkpoint turned into an export: the checkpoint's layout (the ``ner_app`` spec key and the
``tagger.`` prefix of the LightningModule's state) is known here, the export's format in ``tagger/export.py``."""

from __future__ import annotations

from pathlib import Path

from ner_app.files import Claim
from ner_app.runtime.checkpoint import load_checkpoint
from ner_app.tagger.export import ExportError, encoder_by_package, export_model, load_resources
from ner_app.tagger.integrity import check_spec_sizes
from ner_app.tagger.model import BiLstmCrfTagger
from ner_app.tagger.spec import TaggerSpec


def export_checkpoint(
    checkpoint_path: str | Path,
    output_dir: str | Path,
    encoder_package: str | None = None,
    claim: Claim | None = None,
) -> Path:
    """Export a Lightning checkpoint written by ``train.py`` (a frozen feature's files, the biLM's, are read from
    the paths it records; a transformer's named by ``encoder_package`` instead of copied, when given)."""
    path = Path(checkpoint_path)
    checkpoint = load_checkpoint(path)  # weights_only, one clear line for a bad file
    if not isinstance(checkpoint.get("ner_app"), dict):
        raise ExportError(f"{path}: no ner_app tagger spec in this checkpoint (was it written by train.py?)")
    check_spec_sizes(checkpoint["ner_app"], str(path))
    spec = TaggerSpec.from_json(checkpoint["ner_app"], f"{path} (tagger spec)")
    tagger = BiLstmCrfTagger.from_spec(spec, load_resources(spec, Path("."), str(path), closed=False))
    state = {k.removeprefix("tagger."): v for k, v in checkpoint["state_dict"].items()}
    tagger.load_trained_state(state, str(path))
    if encoder_package is not None:
        spec = encoder_by_package(spec, encoder_package, str(path))
    return export_model(tagger, spec, output_dir, claim)
