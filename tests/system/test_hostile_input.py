"""Hostile and careless input: every case is a file or argument generated in tmp_path, and each must
end in one clear ``error:`` line with exit code 2, or be refused by the loader, never run, allocate or mislead.
docs/reliability.md lists what each test guards."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import h5py
import pytest
import torch
from safetensors.torch import load_file, save_file

import train
from ner_app.bilm.weights import load_bilm
from ner_app.cli.commands import main
from ner_app.config.checks import check_pretrain_config
from ner_app.config.load import BilmPretrainConfig, ConfigError, load_config
from ner_app.errors import NerAppError
from ner_app.limits import LimitError
from ner_app.runtime.run_dir import locked_run_folder
from ner_app.tagger.export import load_export
from ner_app.tagger.integrity import integrity_record
from ner_app.text.conll import ConllFormatError, read_conll

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "data" / "tiny_conll"
TINY_BILM = ROOT / "tests" / "data" / "tiny_bilm"


def train_args(run: Path, *extra: str) -> list[str]:
    return ["--config", str(ROOT / "configs/tiny.yaml"), f"output_dir={run}", f"data.dir={TINY}",
            f"elmo.options={TINY_BILM / 'options.json'}", f"elmo.weights={TINY_BILM / 'weights.hdf5'}",
            "elmo.cache_dir=null", "trainer.max_epochs=2", "trainer.threads=1", *extra]  # fmt: skip


def one_error_line(capsys: pytest.CaptureFixture[str], *parts: str) -> str:
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(err) == 1, err
    for part in parts:
        assert part in err[0], err[0]
    return err[0]


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("hostile") / "run"
    assert train.main(train_args(run)) == 0
    return run


# ------------------------------------------------------------------------- defect 2: never unpickle
class Payload:
    """Unpickling this creates a file: proof that code from a checkpoint ran."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):  # noqa: ANN204
        return (Path.touch, (self.marker,))


@pytest.mark.parametrize("command", ["train", "pretrain", "export"])
def test_crafted_checkpoint_never_runs(tmp_path, trained, monkeypatch, capsys, command):
    monkeypatch.setenv(
        "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1"
    )  # the common workaround must not open the door
    marker = tmp_path / "pwned"
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    crafted = run / "checkpoints" / "last.ckpt"
    good = torch.load(crafted, weights_only=True)
    torch.save({**good, "payload": Payload(marker)}, crafted)
    if command == "train":
        code = train.main([*train_args(run), "--resume"])
    elif command == "pretrain":
        config = ROOT / "configs" / "bilm_tiny.yaml"
        corpus = tmp_path / "corpus.txt"
        corpus.write_text("a b c d e f g h\n" * 40)
        code = main(["pretrain-bilm", "--config", str(config), "--resume", f"output_dir={run}",
                     f"data.train={corpus}", "data.heldout=[]"])  # fmt: skip
    else:
        code = main(["export", "--checkpoint", str(crafted), "--output", str(tmp_path / "out")])
    assert code == 2
    assert not marker.exists()
    one_error_line(capsys, str(crafted), "never unpickled")


def test_truncated_checkpoint_is_one_line(tmp_path, trained, capsys):
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    last = run / "checkpoints" / "last.ckpt"
    last.write_bytes(last.read_bytes()[:1000])
    assert train.main([*train_args(run), "--resume"]) == 2
    one_error_line(capsys, str(last), "not a readable checkpoint")


# ---------------------------------------------------------------- defect 3: stale or foreign checkpoints
def test_fresh_run_into_a_used_folder_is_refused(tmp_path, trained, capsys):
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    assert train.main(train_args(run)) == 2
    one_error_line(capsys, "is not empty", "--resume")
    assert not (run / "checkpoints" / "last-v1.ckpt").exists()
    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("my notes")
    assert train.main(train_args(other)) == 2
    one_error_line(capsys, "notes.txt")


def test_resume_under_another_config_or_data_is_refused(tmp_path, trained, capsys):
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    assert train.main([*train_args(run, "model.lstm_hidden=8"), "--resume"]) == 2
    one_error_line(capsys, "another config", "model.lstm_hidden: 16 -> 8")
    data = tmp_path / "data"
    shutil.copytree(TINY, data)
    with open(data / "train.txt", "a") as f:
        f.write("\nExtra O\n")
    assert train.main([*train_args(run, f"data.dir={data}"), "--resume"]) == 2
    one_error_line(capsys, "another config", "data.dir")  # the same folder with other bytes: the next test


def test_a_key_added_after_the_checkpoint_resumes_only_at_its_default(tmp_path):
    """A checkpoint written before a config key existed is the same run while the key keeps its default
    (what the older program did), and another run once the key is set to something else."""
    from ner_app.config.load import TrainConfig, config_to_dict
    from ner_app.runtime.run_dir import IDENTITY_KEY, RunFolderError, check_identity, run_identity

    defaults = config_to_dict(TrainConfig())
    identity = run_identity(config_to_dict(TrainConfig()), "data", defaults)
    older = {"config": dict(identity["config"]), "data": "data"}
    del older["config"]["elmo.context"]  # as written before document context existed
    path = tmp_path / "last.ckpt"
    check_identity({IDENTITY_KEY: older}, identity, path)
    changed = TrainConfig()
    changed.elmo.context = "document"
    with pytest.raises(RunFolderError, match=r"another config \(elmo.context: None -> 'document'\)"):
        check_identity({IDENTITY_KEY: older}, run_identity(config_to_dict(changed), "data", defaults), path)


def test_resume_on_changed_data_files_is_refused(tmp_path, capsys):
    data = tmp_path / "data"
    shutil.copytree(TINY, data)
    run = tmp_path / "run"
    assert train.main(train_args(run, f"data.dir={data}", "trainer.max_epochs=1")) == 0
    capsys.readouterr()
    with open(data / "train.txt", "a") as f:
        f.write("\nExtra O\n")
    assert train.main([*train_args(run, f"data.dir={data}"), "--resume"]) == 2
    one_error_line(capsys, "other data")


# ------------------------------------------------------------------------------ defect 5: one run per folder
def test_second_run_in_a_locked_folder_stops(tmp_path, capsys):
    run = tmp_path / "run"
    with locked_run_folder(run):  # a real flock on run/.lock, as a running train.py holds it
        assert train.main(train_args(run)) == 2
    one_error_line(capsys, "another run is using this output_dir")
    assert not (run / "metrics.json").exists()


# ------------------------------------------------------------------------------- defect 6: non-finite
def test_infinite_learning_rate_is_a_config_error(tmp_path, capsys):
    assert train.main(train_args(tmp_path / "run", "optim.lr=.inf")) == 2
    one_error_line(capsys, "optim.lr", "finite")


def test_diverging_training_stops_at_the_first_non_finite_step(tmp_path, capsys):
    assert train.main(train_args(tmp_path / "run", "optim.lr=1e38", "optim.grad_clip=0")) == 2
    one_error_line(capsys, "training stopped at step")
    assert not (tmp_path / "run" / "export").exists()


def test_nan_bilm_is_refused(tmp_path, capsys):
    copy = tmp_path / "bilm"
    shutil.copytree(TINY_BILM, copy)
    with h5py.File(copy / "weights.hdf5", "a") as f:
        f["CNN_proj/b_proj"][0] = float("nan")
    run = tmp_path / "run"
    assert train.main(train_args(run, f"elmo.weights={copy / 'weights.hdf5'}")) == 2
    one_error_line(capsys, "CNN_proj/b_proj", "NaN")


# ----------------------------------------------------------------------------- defect 7: absurd sizes
@pytest.mark.parametrize(("section", "key", "value"), [("lstm", "dim", 10**9), ("lstm", "n_layers", 10**6),
                                                       ("lstm", "projection_dim", 0)])  # fmt: skip
def test_absurd_biLM_sizes_fail_before_allocating(tmp_path, section, key, value):
    copy = tmp_path / "bilm"
    shutil.copytree(TINY_BILM, copy)
    options = json.loads((copy / "options.json").read_text())
    options[section][key] = value
    (copy / "options.json").write_text(json.dumps(options))
    start = time.perf_counter()
    with pytest.raises(LimitError, match=f"'{section}.{key}'"):
        load_bilm(copy / "options.json", copy / "weights.hdf5")
    assert time.perf_counter() - start < 5


def test_biLM_options_contradicting_the_weights_fail_before_building(tmp_path):
    copy = tmp_path / "bilm"
    shutil.copytree(TINY_BILM, copy)
    options = json.loads((copy / "options.json").read_text())
    options["lstm"]["dim"] *= 2
    (copy / "options.json").write_text(json.dumps(options))
    with pytest.raises(NerAppError, match="W_0' has shape .* from the options \\('lstm.dim'\\)"):
        load_bilm(copy / "options.json", copy / "weights.hdf5")


def test_binary_options_file_is_one_line(tmp_path):
    (tmp_path / "options.json").write_bytes(b"\x89HDF\r\n\x1a\n\xff\xfe")
    with pytest.raises(NerAppError, match="options.json: not a JSON options file"):
        load_bilm(tmp_path / "options.json", TINY_BILM / "weights.hdf5")


# ------------------------------------------------------------------------ defect 8: export integrity
def copy_export(trained: Path, tmp_path: Path) -> Path:
    export = tmp_path / "export"
    shutil.copytree(trained / "export", export)
    return export


def rewrite_spec(export: Path, edit, recompute: bool) -> None:  # noqa: ANN001
    spec = json.loads((export / "tagger.json").read_text())
    edit(spec)
    if recompute:  # a careful forger: the checksums are recomputed, so only the deeper checks can refuse it
        spec["integrity"] = integrity_record(spec, export / "model.safetensors")
    (export / "tagger.json").write_text(json.dumps(spec))


def test_swapped_tags_or_words_are_refused(tmp_path, trained):
    export = copy_export(trained, tmp_path)
    tags = json.loads((export / "tagger.json").read_text())["vocab"]["tags"]["tokens"]
    assert len(tags) > 2

    def swap(spec):  # noqa: ANN001, ANN202
        t = spec["vocab"]["tags"]["tokens"]
        t[0], t[1] = t[1], t[0]

    rewrite_spec(export, swap, recompute=False)
    with pytest.raises(NerAppError, match="changed after export"):
        load_export(export)


def test_flipped_byte_in_weights_is_refused(tmp_path, trained):
    export = copy_export(trained, tmp_path)
    data = bytearray((export / "model.safetensors").read_bytes())
    data[-5] ^= 0x01
    (export / "model.safetensors").write_bytes(bytes(data))
    with pytest.raises(NerAppError, match="checksum differs"):
        load_export(export)


@pytest.mark.parametrize("damage", ["int", "nan", "shape"])
def test_wrong_tensors_are_refused_even_with_recomputed_checksums(tmp_path, trained, damage):
    export = copy_export(trained, tmp_path)
    state = load_file(str(export / "model.safetensors"))
    name = next(k for k, v in state.items() if v.is_floating_point() and v.dim() == 2)
    if damage == "int":
        state[name] = state[name].to(torch.int32)
    elif damage == "nan":
        state[name] = state[name].clone()
        state[name][0, 0] = float("nan")
    else:
        state[name] = state[name][:, :-1].contiguous()
    save_file(state, str(export / "model.safetensors"))
    rewrite_spec(export, lambda spec: None, recompute=True)
    expected = {"int": "torch.int32", "nan": "NaN", "shape": "expected torch.float32"}[damage]
    with pytest.raises(NerAppError, match=expected):
        load_export(export)


def test_absurd_tagger_sizes_are_refused(tmp_path, trained):
    export = copy_export(trained, tmp_path)
    rewrite_spec(export, lambda spec: spec["model"].update(lstm_hidden=10**9), recompute=True)
    with pytest.raises(LimitError, match="'model.lstm_hidden' is 1000000000"):
        load_export(export)


def test_truncated_export_files_are_one_line(tmp_path, trained, capsys):
    export = copy_export(trained, tmp_path)
    (export / "model.safetensors").write_bytes((export / "model.safetensors").read_bytes()[:64])
    assert main(["predict", "--model", str(export), "--input", str(TINY / "valid.txt")]) == 2
    one_error_line(capsys, "model.safetensors")
    (export / "tagger.json").write_text('{"format": "ner_app.tagger/1", "model": ')
    assert main(["predict", "--model", str(export), "--input", str(TINY / "valid.txt")]) == 2
    one_error_line(capsys, "tagger.json:1: not valid JSON")


# ----------------------------------------------------------------------------------- defect 9: YAML
def test_yaml_alias_bomb_is_refused_quickly(tmp_path):
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    (tmp_path / "bomb.yaml").write_text("\n".join([*lines, "seed: *a8"]) + "\n")
    start = time.perf_counter()
    with pytest.raises(ConfigError, match="expands to .* more than"):
        load_config(tmp_path / "bomb.yaml")
    # Under the node bound, a nested value in a type error is quoted shortly, not expanded.
    nested = (
        "[&c [&b [&a [x, x, x, x, x, x, x, x], *a, *a, *a, *a, *a, *a, *a], *b, *b, *b, *b, *b], *c, *c, *c]"
    )
    (tmp_path / "small.yaml").write_text(f"seed: {nested}\n")
    with pytest.raises(ConfigError) as err:
        load_config(tmp_path / "small.yaml")
    assert "key 'seed': expected int" in str(err.value) and len(str(err.value)) < 300
    assert time.perf_counter() - start < 5


def test_duplicate_yaml_keys_are_refused(tmp_path, capsys):
    (tmp_path / "dup.yaml").write_text("seed: 1\ntrainer:\n  max_epochs: 3\n  max_epochs: 4\n")
    assert train.main(["--config", str(tmp_path / "dup.yaml")]) == 2
    one_error_line(capsys, "dup.yaml:4", "duplicate key 'max_epochs'")


def test_binary_or_folder_config_is_one_line(tmp_path, capsys):
    (tmp_path / "bin.yaml").write_bytes(b"seed: 1\n\xff\xfe\x00")
    assert train.main(["--config", str(tmp_path / "bin.yaml")]) == 2
    one_error_line(capsys, "bin.yaml", "not a UTF-8")
    assert train.main(["--config", str(tmp_path)]) == 2
    one_error_line(capsys, "is a folder")
    (tmp_path / "bom.yaml").write_bytes("\ufeffseed: 3\n".encode())
    assert load_config(tmp_path / "bom.yaml").seed == 3


# ----------------------------------------------------------------------------------- defect 10: predict
def predict_bytes(monkeypatch, capsys, export: Path, data: bytes, *extra: str) -> tuple[int, list[str], str]:  # noqa: ANN001
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
    code = main(["predict", "--model", str(export), "--input", "-", *extra])
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err


def test_predict_lines_stay_one_to_one(trained, monkeypatch, capsys):
    text = ["Alice\rBob flew to Paris", "Berlin\x0bis big\x1c ok", "", "end\u2028line\x85x", "Bob"]
    data = ("\n".join(text) + "\r\n").encode()
    code, out, _ = predict_bytes(monkeypatch, capsys, trained / "export", data, "--threads", "1")
    assert code == 0 and len(out) == len(text)
    for line, obj in zip(text, map(json.loads, out), strict=True):
        assert obj["text"] == line
        assert all(line[e["start"] : e["end"]] == e["text"] for e in obj["entities"])


def test_predict_invalid_utf8_names_the_line(trained, monkeypatch, capsys):
    code, out, err = predict_bytes(monkeypatch, capsys, trained / "export", b"Paris\nBer\xfflin\nok\n")
    assert code == 2
    assert not any("Ber" in line for line in out)  # nothing garbled is echoed
    assert (
        err.strip()
        == "error: <stdin>:2: byte 4 (0xff) is not UTF-8; convert the input to UTF-8 (e.g. iconv -f latin1 -t utf-8)"
    )


@pytest.mark.parametrize("argument", ["--batch-size", "--threads"])
def test_predict_bad_numbers_name_the_option(trained, capsys, argument):
    with pytest.raises(SystemExit) as exit_:
        main(["predict", "--model", str(trained / "export"), "--input", "-", argument, "0"])
    assert exit_.value.code == 2
    assert f"argument {argument}: expected an integer >= 1" in capsys.readouterr().err


def test_predict_folder_as_input_is_one_line(trained, tmp_path, capsys):
    assert main(["predict", "--model", str(trained / "export"), "--input", str(tmp_path)]) == 2
    one_error_line(capsys, "is a folder")
    assert main(["predict", "--model", str(TINY / "train.txt"), "--input", str(tmp_path)]) == 2
    one_error_line(capsys, "not a folder")


# -------------------------------------------------------------------------------- defect 11: disk full
DISK_LIMIT = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit then fails with EFBIG, like a full disk
resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))
from ner_app.cli.commands import main
sys.exit(main(sys.argv[1:]))
"""


def run_with_file_limit(limit: int, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", DISK_LIMIT.format(limit=limit), *args], capture_output=True,
                          text=True, env=env, timeout=300)  # fmt: skip


def test_export_on_a_full_disk_is_all_or_nothing(trained, tmp_path):
    out = tmp_path / "export"
    shutil.copytree(trained / "export", out)
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    result = run_with_file_limit(4000, "export", "--checkpoint", str(trained / "checkpoints/best.ckpt"),
                                 "--output", str(out))  # fmt: skip
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.strip().splitlines()[-1].startswith("error: ")
    assert "Traceback" not in result.stderr
    assert {
        p.name: p.read_bytes() for p in out.iterdir() if p.is_file()
    } == before  # the old export is intact
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export"]  # no temporary folder left behind


def test_cache_fill_on_a_full_disk_is_one_line(tmp_path):
    conll = tmp_path / "data"
    conll.mkdir()
    for split in ("train", "valid", "test"):  # distinct sentences: the cache stores each once, ~130 kB in all
        sentences = ["".join(f"{split}{k}w{i} O\n" for i in range(30)) for k in range(20)]
        (conll / f"{split}.txt").write_text("EU B-ORG\n\n" + "\n".join(sentences))
    args = train_args(tmp_path / "run", f"data.dir={conll}", f"elmo.cache_dir={tmp_path / 'cache'}")
    result = run_with_file_limit(20000, "train", *args)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    assert "cannot write the ELMo layer cache" in result.stderr.strip().splitlines()[-1]


# ------------------------------------------------------------------------------ defect 12: smaller ones
def test_bom_before_docstart_is_not_a_sentence(tmp_path):
    path = tmp_path / "bom.txt"
    path.write_bytes("\ufeff-DOCSTART- -X- O O\n\nEU B-ORG\nrejects O\n".encode())
    sentences = read_conll(path)
    assert [s.tokens for s in sentences] == [["EU", "rejects"]]


@pytest.mark.parametrize("override", ["data.max_sentences=-1", "trainer.patience=-1", "trainer.max_epochs=0",
                                      "optim.grad_clip=-1", "data.batch_size=0", "model.dropout=1.5"])  # fmt: skip
def test_out_of_range_values_name_the_key(tmp_path, capsys, override):
    assert train.main(train_args(tmp_path / "run", override)) == 2
    one_error_line(capsys, f"'{override.split('=')[0]}'")
    assert not (tmp_path / "run").exists()


def test_checkpoint_folder_given_as_file_is_one_line(tmp_path, capsys):
    assert main(["export", "--checkpoint", str(tmp_path), "--output", str(tmp_path / "out")]) == 2
    one_error_line(capsys, "is a folder")


def test_embed_threads_option(tmp_path, capsys):
    (tmp_path / "in.txt").write_text("The EU rejects it .\nPeter\n", encoding="utf-8")
    args = ["embed", "--options", str(TINY_BILM / "options.json"), "--weights", str(TINY_BILM / "weights.hdf5"),
            "--input", str(tmp_path / "in.txt"), "--output", str(tmp_path / "out.hdf5")]  # fmt: skip
    assert main([*args, "--threads", "1"]) == 0
    assert torch.get_num_threads() == 1  # conftest restores the count after the test
    with h5py.File(tmp_path / "out.hdf5", "r") as out:
        assert sorted(out.keys()) == ["0", "1"]
    with pytest.raises(SystemExit) as exit_:
        main([*args, "--threads", "0"])
    assert exit_.value.code == 2
    assert "argument --threads: expected an integer >= 1" in capsys.readouterr().err


# ------------------------------------------------------------------------- values that mean something else
@pytest.mark.parametrize("clip", [-1, 0, "nan"])
def test_a_clip_that_is_not_positive_is_refused(tmp_path: Path, clip) -> None:
    """A cell_clip of -1 would clamp every cell to -1: the options file and the pretraining config refuse it."""
    from ner_app.bilm.options import OptionsError, read_options

    options = json.loads((ROOT / "tests/data/tiny_bilm/options.json").read_text())
    options["lstm"]["cell_clip"] = float(clip) if clip == "nan" else clip
    path = tmp_path / "options.json"
    path.write_text(json.dumps(options))  # json writes NaN, which json.loads reads back
    with pytest.raises(OptionsError, match="'lstm.cell_clip' must be a positive number or null"):
        read_options(path)
    value = ".nan" if clip == "nan" else clip  # YAML's spelling of NaN
    cfg = load_config(
        ROOT / "configs/bilm_tiny.yaml", [f"model.proj_clip={value}"], schema=BilmPretrainConfig
    )
    with pytest.raises(ConfigError, match="'model.proj_clip' must be a positive number or null"):
        check_pretrain_config(cfg)


def test_cr_only_line_endings_are_named(tmp_path: Path) -> None:
    path = tmp_path / "mac.txt"
    path.write_bytes(b"EU I-ORG\rrejects O\r\rGerman I-MISC\r")
    with pytest.raises(ConllFormatError, match="lines end with CR alone"):
        read_conll(path)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
@pytest.mark.parametrize("command", ["predict", "embed"])
def test_device_cuda_without_cuda_is_one_line(tmp_path: Path, capsys, command: str) -> None:
    (tmp_path / "in.txt").write_text("a b\n")
    tiny = ROOT / "tests/data/tiny_bilm"
    args = {
        "predict": ["predict", "--model", str(tmp_path), "--input", str(tmp_path / "in.txt"), "--device", "cuda"],
        "embed": ["embed", "--options", str(tiny / "options.json"), "--weights", str(tiny / "weights.hdf5"),
                  "--input", str(tmp_path / "in.txt"), "--output", str(tmp_path / "o.hdf5"), "--device", "cuda"],
    }[command]  # fmt: skip
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--device cuda: torch" in err[0] and "use --device cpu" in err[0]


def test_a_symlink_loop_as_run_folder_is_one_line(tmp_path: Path, capsys) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    for args in (["report", str(loop)], ["compare", str(loop)]):
        assert main(args) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: ") and "loop" in err[0]


def test_output_dir_naming_a_file_is_one_line_and_the_file_stays(tmp_path: Path, capsys) -> None:
    target = tmp_path / "results.txt"
    target.write_text("a user's file")
    args = ["--config", str(ROOT / "configs/tiny.yaml"), f"output_dir={target}", "trainer.max_epochs=1"]
    assert train.main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == f"error: output_dir {target} is a file, expected a folder"
    assert target.read_text() == "a user's file"


def test_any_flipped_byte_in_a_weight_file_loads_or_is_one_error(tmp_path: Path) -> None:
    """Brute force over the hdf5's structure (superblock, object headers, heaps, B-trees: its first 4 KiB and
    every 97th byte after): h5py's own errors never escape as a traceback."""
    good = (TINY_BILM / "weights.hdf5").read_bytes()
    path = tmp_path / "weights.hdf5"
    positions = [*range(0, min(len(good), 4096), 7), *range(4096, len(good), 97)]
    outcomes = {"loaded": 0, "refused": 0}
    for position in positions:
        path.write_bytes(good[:position] + bytes([good[position] ^ 0xFF]) + good[position + 1 :])
        try:
            load_bilm(TINY_BILM / "options.json", path)
            outcomes["loaded"] += 1
        except NerAppError:
            outcomes["refused"] += 1
    assert outcomes["refused"] > 0 and sum(outcomes.values()) == len(positions)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 256 KiB filesystem (tmpfs), where the machine lets this process mount one; skipped otherwise."""
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(
            f"cannot mount a small filesystem here ({done.stderr.decode(errors='replace').strip()[:80]})"
        )
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)  # lazy: files the run left open


@pytest.mark.parametrize("layout", ["layers", "outputs"])
def test_embed_onto_a_full_disk_is_one_line_and_leaves_nothing(
    small_disk: Path, tmp_path: Path, capsys, layout
):
    """HDF5 on a full disk floods stderr and crashed the process; embed measures the disk first."""
    text = tmp_path / "in.txt"
    text.write_text("".join(f"w{i} x{i} y z {i} .\\n" for i in range(300)))
    args = ["embed", "--options", str(TINY_BILM / "options.json"), "--weights", str(TINY_BILM / "weights.hdf5"),
            "--input", str(text), "--output", str(small_disk / "layers.hdf5"),
            *(["--outputs", "all"] if layout == "outputs" else [])]  # fmt: skip
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot write (needs about" in err[0] and "MB free on its disk" in err[0]
    assert list(small_disk.iterdir()) == []
    (text).write_text("a b\\n")  # a small output fits: the check refuses only what cannot fit
    assert main([*args[:6], str(text), *args[7:]]) == 0 and (small_disk / "layers.hdf5").is_file()


def test_training_onto_a_full_disk_leaves_no_truncated_checkpoint(small_disk: Path, capsys):
    """The disk fills while checkpoints and the export are written: one line, and every checkpoint left under
    its name is whole (each was fsynced beside its name and renamed only once complete)."""
    run = small_disk / "run"
    args = ["--config", str(ROOT / "configs/tiny.yaml"), f"output_dir={run}", "elmo.cache_dir=null",
            f"data.dir={ROOT / 'tests/data/tiny_conll'}", f"elmo.options={TINY_BILM / 'options.json'}",
            f"elmo.weights={TINY_BILM / 'weights.hdf5'}", "trainer.max_epochs=3", "trainer.threads=1"]  # fmt: skip
    assert train.main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: ") and "cannot write" in err[-1] and str(small_disk) in err[-1]
    left = sorted((run / "checkpoints").glob("*")) if (run / "checkpoints").is_dir() else []
    assert not [p for p in left if p.name.endswith(".tmp")]
    for path in left:
        torch.load(path, weights_only=True)  # whole, or absent


def test_a_killed_embed_leaves_a_temporary_file_that_the_next_run_sweeps(tmp_path: Path, monkeypatch) -> None:
    """kill -9 during the hdf5 write leaves ``.layers.hdf5.*.tmp``; the next write of the same file removes it
    (once untouched for ``STALE_AFTER_S``; a live writer keeps its file fresh) and writes the whole output."""
    from ner_app import files

    text = tmp_path / "in.txt"
    text.write_text("".join(f"w{i} x{i % 97} y z {i} .\n" for i in range(20_000)))
    out = tmp_path / "out" / "layers.hdf5"
    args = ["embed", "--options", str(TINY_BILM / "options.json"), "--weights", str(TINY_BILM / "weights.hdf5"),
            "--input", str(text), "--output", str(out), "--threads", "1"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen([sys.executable, "-m", "ner_app", *args], env=env, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not list(out.parent.glob(".layers.hdf5.*.tmp")):
        time.sleep(0.05)
    time.sleep(0.3)  # inside the write
    process.kill()
    process.wait()
    left = list(out.parent.glob(".layers.hdf5.*.tmp"))
    assert left and not out.exists()
    monkeypatch.setattr(files, "STALE_AFTER_S", 0.0)
    assert main(args) == 0
    assert sorted(p.name for p in out.parent.iterdir()) == ["layers.hdf5"]
    with h5py.File(out, "r") as f:
        assert len(f) == 20_000


def test_an_export_left_half_written_by_a_killed_run_is_swept(trained, tmp_path: Path) -> None:
    out = tmp_path / "export"
    half = tmp_path / ".export.k7x.tmp"
    half.mkdir()
    (half / "model.safetensors").write_bytes(b"half")
    fresh = tmp_path / ".export.live.tmp"  # a writer still at work: touched just now, kept
    fresh.mkdir()
    os.utime(half, (time.time() - 3600, time.time() - 3600))
    assert main(["export", "--checkpoint", str(trained / "checkpoints/best.ckpt"), "--output", str(out)]) == 0
    assert not half.exists() and fresh.exists() and (out / "tagger.json").is_file()
