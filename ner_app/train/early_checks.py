"""What a training run refuses that is known before torch and Lightning are imported (a few seconds on a busy
machine): the config's values, the biLM's files and where the data is. ``train`` runs these checks first, so
that each mistake is one line within a second or two; the run checks the same again with the same messages."""

from __future__ import annotations

from pathlib import Path

from ner_app.config.checks import check_train_config
from ner_app.config.load import REPOSITORY
from ner_app.config.schema import ElmoConfig, TrainConfig, input_features
from ner_app.errors import MissingFileError, NerAppError
from ner_app.text.annotations.splits import is_brat_folder
from ner_app.train.corpus import check_data_source, data_reading


class InitSourceError(NerAppError):
    """``model.init_from`` names something other than an export folder."""


def check_elmo_files(elmo: ElmoConfig) -> None:
    """With ELMo on, ``elmo.options`` and ``elmo.weights`` must name files."""
    if not elmo.enabled:
        return
    if not elmo.options or not elmo.weights:
        raise MissingFileError(
            "elmo.enabled needs elmo.options and elmo.weights (paths to options.json and hdf5)"
        )
    shipped = REPOSITORY / "data" / "bilm"
    for key, path in (("elmo.options", elmo.options), ("elmo.weights", elmo.weights)):
        if not Path(path).is_file():
            where = (
                f"the shipped biLM is {shipped} (options.json, weights.hdf5)"
                if (shipped / "weights.hdf5").is_file()
                else f"this installation has no shipped biLM ({shipped}: it comes with the repository's data/)"
            )
            raise MissingFileError(
                f"{key}: {path} does not exist (a relative path is looked for under the config's project root, "
                f"or the working directory when typed in an override, then in the ner_app repository); {where}. Set elmo.options and elmo.weights to a biLM's files "
                "(ner-app download-elmo fetches a public ELMo), train without ELMo (elmo.enabled=false), or "
                "pretrain your own (ner-app pretrain-bilm: hours, docs/pretraining.md)."
            )


def check_init_from(init_from: str | None, previous_dev: str | None) -> None:
    """``model.init_from`` must be an export folder (not a checkpoint, not ONNX graphs), and
    ``data.previous_dev`` a file; what is inside them is checked when they are read."""
    if previous_dev is not None and not Path(previous_dev).exists():
        raise MissingFileError(
            f"data.previous_dev: {previous_dev}: not found (expected the old model's dev file)"
        )
    if (
        previous_dev is not None
        and Path(previous_dev).is_dir()
        and not is_brat_folder(Path(previous_dev), None)
    ):
        raise InitSourceError(
            f"data.previous_dev: {previous_dev}: a folder without .ann files; expected the old model's dev file "
            "(a file, or a brat folder)"
        )
    if init_from is None:
        return
    folder, how = Path(init_from), "a run writes one in RUN/export"
    if not folder.exists():
        raise MissingFileError(f"model.init_from: {folder}: not found (expected an export folder; {how})")
    if not folder.is_dir():
        raise InitSourceError(
            f"model.init_from: {folder}: a file, expected an export folder ({how}; ner-app export --checkpoint "
            "CKPT --output DIR makes one of a checkpoint)"
        )
    if (folder / "onnx.json").is_file() and not (folder / "tagger.json").is_file():
        raise InitSourceError(
            f"model.init_from: {folder}: ONNX graphs, which do not train; give the export folder they were "
            "made from (tagger.json and model.safetensors)"
        )
    if not (folder / "tagger.json").is_file():
        raise InitSourceError(f"model.init_from: {folder}: not a ner_app export (no tagger.json; {how})")


def check_before_training(cfg: TrainConfig) -> None:
    """The config's values, then the data source, then the biLM's files and the export a run continues: in
    the order the run meets them."""
    check_train_config(cfg)
    check_data_source(cfg.data.dir, cfg.data.hub_name, cfg.data.format)
    data_reading(cfg.data)  # data.labels' syntax, before anything heavy
    if "elmo" in input_features(cfg):
        check_elmo_files(cfg.elmo)
    check_init_from(cfg.model.init_from, cfg.data.previous_dev)
