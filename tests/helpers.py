"""Helpers the tests share: the ../shared folder (skipped when missing), tiny random biLMs, a synthetic
grammar for pretraining runs. Fixtures live in conftest.py; no test file imports another."""

from __future__ import annotations

import contextlib
import http.client
import io
import json
import os
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
import torch

from ner_app.bilm.options import BilmOptions
from ner_app.cli.commands import main
from ner_app.tagger.features.elmo import ElmoRef
from ner_app.tagger.integrity import integrity_record
from ner_app.tagger.spec import BASE_FEATURES, TaggerSizes, TaggerSpec, VocabSpec
from ner_app.text.vocab import Vocab

REPO = Path(__file__).resolve().parents[1]  # the repository root
SHARED = Path(os.environ.get("NER_SHARED", REPO.parent / "shared"))


def shared_path(*parts: str) -> Path:
    """A path under ../shared, or skip the test when it is not there."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} not found (set NER_SHARED to the shared data folder)")
    return path


TINY_OPTIONS = BilmOptions(
    char_dim=4,
    filters=((1, 4), (2, 8), (3, 8)),
    n_highway=1,
    activation="relu",
    lstm_dim=12,
    projection_dim=6,
    n_layers=2,
    cell_clip=3.0,
    proj_clip=3.0,
    use_skip_connections=True,
)


def random_bilm(options: BilmOptions = TINY_OPTIONS, seed: int = 0, scale: float = 0.5):
    """A biLM with random weights large enough that clipping and every gate matter."""
    torch.manual_seed(seed)
    bilm = options.build()
    with torch.no_grad():
        for p in bilm.parameters():
            p.uniform_(-scale, scale)
        bilm.token_encoder.char_cnn.char_embed.weight[0].zero_()
    return bilm.eval()


NOUNS, ADJS, VERBS = ["cat", "dog", "bird", "fish"], ["big", "small", "red", "old"], ["sees", "likes", "eats"]


def vocab_spec(
    words: Vocab, chars: Vocab, tags: Sequence[str], max_word_chars: int = 30, elmo: bool = True
) -> TaggerSpec:
    """A ``TaggerSpec`` around ready vocabularies (``Vocab`` words and chars, a tag list), for ``encode_batch``:
    words, chars and (``elmo``) a stand-in ELMo entry, whose char ids every batch then carries."""
    sizes = TaggerSizes(
        word_dim=6, char_dim=4, char_filters=5, char_width=3, lstm_hidden=7, lstm_layers=2, dropout=0.5
    )
    ref = ElmoRef("options.json", "weights.hdf5", "0" * 64, 0.0, False)
    return TaggerSpec(
        sizes=sizes,
        words=VocabSpec.of(words),
        num_trainable_words=len(words),
        chars=VocabSpec.of(chars),
        tags=VocabSpec(tuple(tags), False, False),
        scheme="BIOES",
        source_scheme="BIOES",
        max_word_chars=max_word_chars,
        features=(*BASE_FEATURES, *([ref] if elmo else [])),
    )


def grammar_sentence(rng: random.Random) -> str:
    """A sentence of a small synthetic grammar over 15 words: an LM can learn it far below uniform perplexity."""
    words = ["the", rng.choice(ADJS), rng.choice(NOUNS), rng.choice(VERBS), "a", rng.choice(NOUNS)]
    if rng.random() < 0.3:
        words += ["and", "the", rng.choice(NOUNS), rng.choice(VERBS)]
    return " ".join([*words, "."])


def write_grammar(path: Path, sentences: int, seed: int, doc_every: int = 7) -> Path:
    rng = random.Random(seed)
    # A blank line after every doc_every sentences starts a new document.
    ends = ["\n\n" if i % doc_every == doc_every - 1 else "\n" for i in range(sentences)]
    lines = [grammar_sentence(rng) + end for end in ends]
    path.write_text("".join(lines), encoding="utf-8")
    return path


def tiny_overrides(tmp_path: Path, corpus: Path, heldout: list[Path], steps: int) -> list[str]:
    return [
        f"output_dir={tmp_path / 'run'}",
        f"data.train={corpus}",
        f"data.heldout=[{', '.join(map(str, heldout))}]",
        "data.vocab_size=50",
        "data.heldout_max_sentences=null",
        "data.max_train_tokens=null",
        f"train.max_steps={steps}",
        "train.batch_size=16",
        "train.unroll_steps=10",
        "train.n_negative_samples=8",
        "train.lr=0.02",
        "train.val_every_n_steps=50",
    ]


# ---------------------------------------------------------------- hostile input (tests/system/hostile/)
TINY = REPO / "tests" / "data" / "tiny_conll"
TINY_BILM = REPO / "tests" / "data" / "tiny_bilm"
ROOT = REPO


def train_args(run: Path, *extra: str) -> list[str]:
    return [
        "--config",
        str(ROOT / "configs/tiny.yaml"),
        f"output_dir={run}",
        f"data.dir={TINY}",
        f"elmo.options={TINY_BILM / 'options.json'}",
        f"elmo.weights={TINY_BILM / 'weights.hdf5'}",
        "elmo.cache_dir=null",
        "trainer.max_epochs=2",
        "trainer.threads=1",
        *extra,
    ]


def one_error_line(capsys: pytest.CaptureFixture[str], *parts: str) -> str:
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(err) == 1, err
    for part in parts:
        assert part in err[0], err[0]
    return err[0]


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


def predict_bytes(monkeypatch, capsys, export: Path, data: bytes, *extra: str) -> tuple[int, list[str], str]:  # noqa: ANN001
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
    code = main(["predict", "--model", str(export), "--input", "-", *extra])
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err


def run_with_file_limit(limit: int, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", DISK_LIMIT.format(limit=limit), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


DISK_LIMIT = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit then fails with EFBIG, like a full disk
resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))
from ner_app.cli.commands import main
sys.exit(main(sys.argv[1:]))
"""


def broken_onnx(onnx_folder: Path, tmp_path: Path, damage: str) -> tuple[Path, str]:
    """A copy of the ONNX folder damaged as ``damage`` says, and the one error line predict and evaluate give for it."""
    folder = tmp_path / "onnx"
    shutil.copytree(onnx_folder, folder)
    manifest = folder / "onnx.json"
    if damage == "missing-graph":
        (folder / "tagger.onnx").unlink()
        return folder, f"error: {folder / 'tagger.onnx'}: missing or changed after export (sha256 differs)"
    if damage == "changed-manifest":  # an edited tag list: the manifest's own checksum no longer holds
        manifest.write_text(
            manifest.read_text(encoding="utf-8").replace('"B-PER"', '"B-PERSON"'), encoding="utf-8"
        )
        return folder, (
            f"error: {manifest}: changed after export (manifest_sha256 differs: its tags, sizes or char layout "
            "were edited); export the model again"
        )
    manifest.unlink()
    return folder, (
        f"error: {folder}: an ONNX folder without onnx.json (it holds .onnx graphs); export it again with "
        "ner-app export --onnx"
    )


def wait_until_healthy(proc: subprocess.Popen, port: int, log: Path, seconds: float) -> None:
    """Wait until the server process ``proc`` answers ``GET /health`` with 200 on 127.0.0.1:``port``; fail the
    test with the end of its ``log`` if it exits or is not ready within ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        assert proc.poll() is None, f"serve exited with {proc.returncode}: {log.read_text()[-2000:]}"
        with contextlib.suppress(OSError):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/health")
            if conn.getresponse().status == 200:
                return
        assert time.monotonic() < deadline, f"serve not ready after {seconds:g} s: {log.read_text()[-2000:]}"
        time.sleep(0.2)
