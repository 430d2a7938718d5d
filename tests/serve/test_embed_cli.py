"""``python -m ner_app embed`` end to end on a tiny biLM written to tmp_path."""

import subprocess
import sys

import h5py
import numpy as np
import pytest
import torch

from ner_app.bilm import batch_to_ids, load_bilm, remove_sentence_boundaries
from ner_app.cli.commands import main


def embed_args(bilm_files, source) -> list[str]:
    """``embed`` with the tiny biLM's files and an input file, before --output and the options under test."""
    options, weights = bilm_files
    return ["embed", "--options", str(options), "--weights", str(weights), "--input", str(source)]


def test_embed_writes_every_layer_per_line(tmp_path, tiny_bilm_files):
    options, weights = tiny_bilm_files
    lines = ["The EU rejects German call .", "", "Peter Blackburn", "Zürich 😀 a"] + ["x y"] * 9
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    args = embed_args(tiny_bilm_files, tmp_path / "in.txt")
    assert main([*args, "--output", str(tmp_path / "out.hdf5"), "--batch-size", "4"]) == 0
    bilm = load_bilm(options, weights).eval()
    with h5py.File(tmp_path / "out.hdf5", "r") as out:
        assert sorted(out.keys(), key=int) == [str(i) for i in range(len(lines))]
        assert out["1"].shape == (3, 0, 12) and out["1"].dtype == np.float32
        for i, line in enumerate(lines[:4]):
            tokens = line.split(" ") if line else []
            with torch.no_grad():
                result = bilm(batch_to_ids([tokens]))
            expected = np.stack(
                [remove_sentence_boundaries(x, result.mask)[0][0].numpy() for x in result.layers]
            )
            assert out[str(i)].shape == (3, len(tokens), 12)
            np.testing.assert_allclose(out[str(i)][...], expected, atol=1e-6, rtol=1e-6)


@pytest.mark.system
def test_embed_bad_input_is_one_clear_line(tmp_path, tiny_bilm_files):
    options, weights = tiny_bilm_files
    (tmp_path / "in.txt").write_bytes(b"fine line\nbad \xff byte\n")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "ner_app",
            "embed",
            "--options",
            str(options),
            "--weights",
            str(weights),
            "--input",
            str(tmp_path / "in.txt"),
            "--output",
            str(tmp_path / "o.hdf5"),
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2
    assert result.stderr.strip() == (  # the line reader of predict, too (text/lines.py)
        f"error: {tmp_path / 'in.txt'}:2: byte 5 (0xff) is not UTF-8; convert the input to UTF-8 "
        "(e.g. iconv -f latin1 -t utf-8)"
    )
    assert not (tmp_path / "o.hdf5").exists()


def test_help_lists_commands():
    result = subprocess.run([sys.executable, "-m", "ner_app", "--help"], capture_output=True, text=True)
    assert result.returncode == 0 and "embed" in result.stdout


def test_embed_bf16_is_close_to_fp32_in_both_contexts(tmp_path, tiny_bilm_files):
    """--precision bf16 changes the arithmetic (not bit-exact) but not the file: same datasets, close values."""
    options, weights = tiny_bilm_files
    lines = ["The EU rejects German call .", "Peter Blackburn", "", "BRUSSELS 1996-08-22", "x y z"]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    base = embed_args(tiny_bilm_files, tmp_path / "in.txt")
    for context in ("sentence", "document"):
        outputs = {}
        for precision in ("fp32", "bf16"):
            out = tmp_path / f"{context}_{precision}.hdf5"
            assert main([*base, "--output", str(out), "--context", context, "--precision", precision]) == 0
            with h5py.File(out, "r") as f:
                outputs[precision] = {k: f[k][...] for k in f}
        assert outputs["fp32"].keys() == outputs["bf16"].keys()
        differs = False
        for key, exact in outputs["fp32"].items():
            approx = outputs["bf16"][key]
            assert approx.dtype == np.float32 and approx.shape == exact.shape
            scale = max(float(np.abs(exact).max(initial=0.0)), 1e-3)
            np.testing.assert_allclose(approx, exact, atol=0.05 * scale, rtol=0)
            differs |= not np.array_equal(approx, exact)
        assert differs, "bf16 autocast left every value bit-identical: it was not applied"


def _datasets(path) -> dict[str, np.ndarray]:
    """Every dataset of an embed file by its path in the file (a line's dataset, or a group's outputs)."""
    found: dict[str, np.ndarray] = {}
    with h5py.File(path, "r") as out:
        out.visititems(
            lambda name, item: found.update({name: item[...]}) if isinstance(item, h5py.Dataset) else None
        )
    return found


@pytest.mark.parametrize(
    "extra", [["--context", "sentence"], ["--context", "document"], ["--outputs", "all"]]
)
def test_embed_under_a_budget_equals_no_budget(tmp_path, tiny_bilm_files, extra):
    """A long line and short ones, batched under a budget of 40 positions: the layers of no budget."""
    torch.set_num_threads(1)
    vocab = ["The", "EU", "rejects", "German", "call", ".", "Peter", "Zürich"]
    long = " ".join(vocab[i % 8] for i in range(300))
    lines = ["The EU rejects", long, "", "Peter", "call . call", "German call", long[:60].strip(), "EU"]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    args = [*embed_args(tiny_bilm_files, tmp_path / "in.txt"), "--batch-size", "4", *extra]
    for name, budget in (("free", "1000000000"), ("bounded", "40")):
        assert main([*args, "--output", str(tmp_path / f"{name}.hdf5"), "--max-tokens", budget]) == 0
    free, bounded = _datasets(tmp_path / "free.hdf5"), _datasets(tmp_path / "bounded.hdf5")
    assert sorted(free) == sorted(bounded) and len(free) >= len(lines)
    for name, value in free.items():
        np.testing.assert_allclose(bounded[name], value, atol=1e-6, rtol=1e-6, err_msg=name)


@pytest.mark.parametrize("bad", ["0", "-3", "1.5", "many"])
def test_embed_bad_max_tokens_is_one_clear_line(tmp_path, tiny_bilm_files, capsys, bad):
    with pytest.raises(SystemExit) as exit_:
        main(
            [
                *embed_args(tiny_bilm_files, tmp_path / "in.txt"),
                "--output",
                str(tmp_path / "o.hdf5"),
                "--max-tokens",
                bad,
            ]
        )
    assert exit_.value.code == 2
    err = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert len(err) == 1 and "argument --max-tokens: expected an integer >= 1" in err[0], err
    assert not (tmp_path / "o.hdf5").exists()
