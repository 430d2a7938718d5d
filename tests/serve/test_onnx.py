"""ONNX export: the graphs and the numpy CRF tag as ``predict`` does, with onnxruntime and numpy only."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import train
from ner_app.bilm.bilm import add_sentence_boundaries
from ner_app.bilm.char_mapper import batch_to_ids
from ner_app.bilm.weights import bilm_fingerprint
from ner_app.cli.commands import main
from ner_app.onnx import export as onnx_export
from ner_app.onnx import manifest as onnx_manifest
from ner_app.onnx import predictor as onnx_predictor
from ner_app.onnx.export import OnnxExportError, export_onnx, export_onnx_from
from ner_app.onnx.predictor import OnnxModelError, OnnxPredictor
from ner_app.predict import predictor
from ner_app.predict.predictor import Predictor
from ner_app.tagger.batch import encode_batch
from ner_app.tagger.export import load_export
from ner_app.tagger.model import BiLstmCrfTagger
from ner_app.tagger.spec import ElmoRef, TaggerSizes, TaggerSpec
from ner_app.text import pieces
from ner_app.text.conll import read_conll
from ner_app.text.readings import ReadingOptions
from ner_app.text.tags import convert
from tests.helpers import one_error_line, random_bilm

pytestmark = pytest.mark.system  # trains a tiny run: out of the fast lane

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "data" / "tiny_conll"
TEXTS = ["Alice Smith flew to Paris.", "", "Acme Corp hired Bob Jones in Berlin. Then Alice left!"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny tagger trained for two epochs with ELMo and a small GloVe file, so that frozen rows are used."""
    from ner_app.bilm import save_bilm

    tmp = tmp_path_factory.mktemp("onnx")
    options, weights = save_bilm(random_bilm(), tmp / "bilm")
    rng = np.random.default_rng(0)
    words = ["alice", "paris", "berlin", "bob", "zebra", "quantum", "the", "madrid", "acme"]
    glove = "".join(f"{w} {' '.join(f'{v:.4f}' for v in rng.normal(size=8))}\n" for w in words)
    (tmp / "glove.txt").write_text(glove, encoding="utf-8")
    code = train.main(
        [
            "--config",
            str(ROOT / "configs/tiny.yaml"),
            f"output_dir={tmp / 'run'}",
            f"data.dir={TINY}",
            f"elmo.options={options}",
            f"elmo.weights={weights}",
            f"model.glove={tmp / 'glove.txt'}",
            "trainer.max_epochs=12",
            "trainer.threads=1",
        ]
    )
    assert code == 0
    export_onnx_from(tmp / "run/export", tmp / "onnx")  # the command's own path: test_export_again_...
    return tmp


def sentences() -> list[list[str]]:
    """The tiny dev and test sentences, one long sentence cut into pieces, and words no vocabulary has."""
    found = [s.tokens for name in ("valid.txt", "test.txt") for s in read_conll(TINY / name)]
    return [*found, ["Zyx", "Ünïcödé", "x" * 60, "<S>", "</S>", "Paris"], ["Alice", "met", "Bob"] * 90, []]


def emission_gap(
    onnx: OnnxPredictor, tagger: BiLstmCrfTagger, spec: TaggerSpec, batch: list[list[str]]
) -> float:
    encoded = encode_batch(batch, spec)
    with torch.no_grad():
        expected = tagger.emissions(encoded).numpy()
    return float(np.abs(onnx.emissions(batch) - expected)[encoded["mask"].numpy()].max())


def test_onnx_tags_as_predict_does(trained: Path) -> None:
    assert sorted(p.name for p in (trained / "onnx").iterdir()) == [
        ".ner-app",  # the marker of export's own output (docs/reliability.md#the-output-policy)
        "bilm.onnx",
        "crf.npz",
        "onnx.json",
        "tagger.onnx",
    ]
    onnx = OnnxPredictor(trained / "onnx", batch_size=4)
    reference = Predictor.from_export(trained / "run/export", batch_size=4)
    batch = sentences()
    found, expected = onnx.tag(batch), reference.tag(batch)
    assert [tags for tags, _ in found] == [tags for tags, _ in expected]
    assert any(t != "O" for tags, _ in found for t in tags)  # a tagger that finds entities: a real comparison
    scores = [
        (a, b) for (_, x), (_, y) in zip(found, expected, strict=True) for a, b in zip(x, y, strict=True)
    ]
    # torch's marginals are float32 sums in log space (about 1e-4 off on long sentences); the ONNX predictor's
    # are float64 (test_the_numpy_crf_decodes_as_the_crf_does checks them against float64 torch)
    np.testing.assert_allclose(*zip(*scores, strict=True), atol=2e-4)
    assert onnx.to_source(found[0][0]) == reference.to_source(expected[0][0])
    tagger, spec = load_export(trained / "run/export")
    assert emission_gap(onnx, tagger, spec, [s for s in batch[:-2] if s]) < 1e-4
    assert spec.num_trainable_words < len(spec.word_vocab)  # GloVe words the tagger never trained are in


def test_predict_texts_gives_predicts_json(
    trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "in.txt"
    source.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    assert main(["predict", "--model", str(trained / "run/export"), "--input", str(source)]) == 0
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    found = list(OnnxPredictor(trained / "onnx").predict_texts(TEXTS))
    assert [len(p["entities"]) for p in printed] == [len(f["entities"]) for f in found] and printed[0][
        "entities"
    ]
    for p, f in zip(printed, found, strict=True):
        assert [{**e, "score": None} for e in p["entities"]] == [{**e, "score": None} for e in f["entities"]]
        assert np.allclose(
            [e["score"] for e in p["entities"]], [e["score"] for e in f["entities"]], atol=2e-4
        )


def close(a: object, b: object, tolerance: float = 2e-4) -> bool:
    """Equal JSON, scores (``score``, ``o_score``) to within ``tolerance``: onnxruntime's emissions differ
    from torch's in their last bits."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(
            abs(a[k] - b[k]) <= tolerance if k in ("score", "o_score") else close(a[k], b[k], tolerance)
            for k in a
        )
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(close(x, y, tolerance) for x, y in zip(a, b, strict=True))
    return a == b


def test_onnx_reading_options_give_predicts_json(
    trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Entity scores (readings' probabilities), min_score, alternatives and flagged tokens: torch's and
    onnxruntime's agree, with a temperature too."""
    texts = [*TEXTS, *(" ".join(s) for s in sentences()[:-1])]
    source = tmp_path / "in.txt"
    source.write_text("\n".join(texts) + "\n", encoding="utf-8")
    flags = ["--min-score", "0.2", "--alternatives", "2", "--flag-missed", "0.95"]
    assert main(["predict", "--model", str(trained / "run/export"), "--input", str(source), *flags]) == 0
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    onnx = OnnxPredictor(trained / "onnx")
    options = ReadingOptions(min_score=0.2, alternatives=2, flag_missed=0.95)
    found = list(onnx.predict_texts(texts, options=options))
    assert any(p["flagged"] for p in printed) and any(
        e["alternatives"] for p in printed for e in p["entities"]
    )
    assert close(found, printed)
    reference = Predictor.from_export(trained / "run/export")
    onnx.temperature = reference.tagger.crf.temperature = 1.8
    warm = list(reference.predict_texts(texts, options=options))
    assert not close(warm, printed) and close(list(onnx.predict_texts(texts, options=options)), warm)


# Python started with these packages absent: importing one fails, and a probe for one (find_spec, as torch
# does for optional packages) finds nothing it could load.
BLOCK = """
import importlib.abc, importlib.machinery, sys
class Absent(importlib.abc.Loader):
    def create_module(self, spec):
        raise ModuleNotFoundError(f"No module named {{spec.name!r}} (blocked by the test)")
    def exec_module(self, module):
        pass
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in {names!r}:
            return importlib.machinery.ModuleSpec(name, Absent())
sys.meta_path.insert(0, Block())
"""


def test_the_predictor_runs_with_torch_blocked(trained: Path) -> None:
    code = (
        BLOCK.format(names=("torch", "pytorch_lightning", "lightning_fabric"))
        + f"""
import json
from ner_app.onnx.predictor import OnnxPredictor
tags = OnnxPredictor({str(trained / "onnx")!r}).tag([["Alice", "flew", "to", "Paris"]])
assert not [m for m in sys.modules if m.split(".")[0] == "torch"]
print(json.dumps(tags))
"""
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    expected = OnnxPredictor(trained / "onnx").tag([["Alice", "flew", "to", "Paris"]])
    assert [tags for tags, _ in json.loads(done.stdout)] == [tags for tags, _ in expected]


def test_elmo_char_ids_are_the_char_mappers(trained: Path) -> None:
    batch = [["Alice", "é", "x" * 80, "<S>", "</S>", "", "日本語" * 10, "\ud800"], ["a"]]
    expected = add_sentence_boundaries(batch_to_ids(batch))[0].numpy()
    assert np.array_equal(OnnxPredictor(trained / "onnx").elmo_char_ids(batch), expected)


def test_the_modules_agree_on_shared_constants(trained: Path) -> None:
    assert onnx_predictor.ONNX_FORMAT == onnx_export.ONNX_FORMAT
    # the char layout the exporter writes is the one the predictor accepts, and both name one checksum key
    manifest = json.loads((trained / "onnx" / "onnx.json").read_text())
    assert manifest["elmo_chars"] == onnx_manifest.ELMO_CHAR_LAYOUT
    assert onnx_export.MANIFEST_SUM == onnx_manifest.MANIFEST_SUM
    # one piece length and one line-to-entities path (ner_app/text/pieces.py) for both predictors
    assert onnx_predictor.split_pieces is predictor.split_pieces is pieces.split_pieces
    assert onnx_predictor.predict_lines is predictor.predict_lines is pieces.predict_lines


def random_spec(elmo: ElmoRef | None, scheme: str = "BIOES") -> TaggerSpec:
    gold = read_conll(TINY / "train.txt")
    sizes = TaggerSizes(
        word_dim=6, char_dim=4, char_filters=5, char_width=3, lstm_hidden=7, lstm_layers=2, dropout=0.5
    )
    tags = [convert(s.tags, "IOB1", scheme) for s in gold]
    return TaggerSpec.from_training_data(
        sizes,
        [s.tokens for s in gold],
        tags,
        scheme,
        "IOB1",
        pretrained_words=["zebra", "quantum"],
        elmo=elmo,
    )


@pytest.mark.parametrize(
    ("mixes", "scheme"),
    [(None, "BIO"), ("input", "IOB1"), ("output", "BIOES")],
    ids=["baseline", "input", "output"],
)
def test_every_tagger_shape_exports(tmp_path: Path, mixes: str | None, scheme: str) -> None:
    """No ELMo, ELMo at the input (layer norm), and at the input and output; two BiLSTM layers, each scheme."""
    bilm = random_bilm(seed=1)
    elmo = None
    if mixes is not None:
        elmo = ElmoRef(
            "bilm/options.json",
            "bilm/weights.hdf5",
            bilm_fingerprint(bilm),
            dropout=0.5,
            do_layer_norm=mixes == "input",
            at_output=mixes == "output",
        )
    spec = random_spec(elmo, scheme)
    torch.manual_seed(3)
    tagger = BiLstmCrfTagger.from_spec(spec, {"elmo": bilm})
    with torch.no_grad():
        tagger.crf.transitions.uniform_(-3, 3)  # scores far enough apart that Viterbi has no near-ties
        for mix in tagger.feature("elmo").elmo.scalar_mixes if "elmo" in tagger.features else []:
            mix.scalar_parameters.uniform_(-1, 1)
    export_onnx(tagger, spec, tmp_path / "onnx")
    assert (tmp_path / "onnx" / "bilm.onnx").exists() == (mixes is not None)
    onnx = OnnxPredictor(tmp_path / "onnx", batch_size=3)
    batch = [s for s in sentences() if 0 < len(s) <= 250]  # no piece cut: one decode per sentence
    assert emission_gap(onnx, tagger.eval(), spec, batch) < 1e-4
    encoded = encode_batch(batch, spec)
    with torch.no_grad():
        paths = tagger.decode(encoded)
    assert [tags for tags, _ in onnx.tag(batch)] == spec.decode_tags(paths, encoded["mask"])


def test_the_numpy_crf_decodes_as_the_crf_does() -> None:
    from ner_app.onnx.crf import marginals, viterbi
    from ner_app.tagger.crf.calibration import tempered
    from ner_app.tagger.crf.constraints import allowed_transitions
    from ner_app.tagger.crf.crf import CRF

    tags = ["O", "B-PER", "I-PER", "E-PER", "S-PER", "B-LOC", "I-LOC", "E-LOC", "S-LOC"]
    torch.manual_seed(0)
    crf = CRF(len(tags), allowed_transitions(tags, "BIOES"))
    with torch.no_grad():
        for p in crf.parameters():
            p.uniform_(-2, 2)
    lengths = torch.tensor([1, 9, 4, 17, 17, 2])
    emissions = torch.randn(len(lengths), 17, len(tags)) * 3
    mask = torch.arange(17)[None, :] < lengths[:, None]
    scores = [s.detach().numpy() for s in crf._scores()]
    paths = viterbi(emissions.numpy(), lengths.numpy(), *scores)
    assert np.array_equal(paths, crf.decode(emissions, mask)[0].numpy())
    found = marginals(emissions.numpy(), lengths.numpy(), *scores)
    with torch.no_grad():
        np.testing.assert_allclose(found, crf.marginals(emissions, mask).numpy(), atol=1e-5)
        # computed in probability space, rescaled each step, in float64: float64 torch to float32 rounding,
        # also on long sentences with large scores and at a temperature
        long = torch.randn(3, 200, len(tags), dtype=torch.float64) * 12
        lengths = torch.tensor([200, 117, 1])
        mask = torch.arange(200)[None, :] < lengths[:, None]
        for t in (1.0, 2.5):
            found = marginals(long.float().numpy(), lengths.numpy(), *scores, temperature=t)
            crf64 = CRF(len(tags), allowed_transitions(tags, "BIOES")).double()
            crf64.load_state_dict({k: v.double() for k, v in crf.state_dict().items()})
            with tempered(crf64, t) as at_t:
                expected = at_t.marginals(long.float().double(), mask).numpy()
            np.testing.assert_allclose(found, expected, atol=1e-6)


def test_export_again_replaces_its_own_folder_only(trained: Path, tmp_path: Path, capfd) -> None:
    out = tmp_path / "onnx"
    for _ in range(2):
        assert main(["export", "--onnx", "--model", str(trained / "run/export"), "--output", str(out)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["onnx"]  # no temporary folder or spool left
    # the exporter's C++ notes (written to file descriptor 2) are held back: only the command's own lines
    assert capfd.readouterr().err.splitlines() == [f"exported {trained / 'run/export'} to ONNX in {out}"] * 2
    first = json.loads((trained / "onnx" / "onnx.json").read_text())["sha256"]
    assert json.loads((out / "onnx.json").read_text())["sha256"] == first  # the same graphs, byte for byte
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    argv = ["export", "--onnx", "--model", str(trained / "run/export"), "--output", str(tmp_path / "mine")]
    assert main(argv) == 2
    one_error_line(capfd, "exists and is not an earlier output of export", "notes.txt")
    assert [p.name for p in (tmp_path / "mine").iterdir()] == ["notes.txt"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model", "{run}"], "not a ner_app export (missing tagger.json)"),
        (["--model", "{run}/export", "--output", "{run}/export/onnx"], "write the ONNX folder beside it"),
        (["--model", "{run}/export", "--checkpoint", "{run}/checkpoints/best.ckpt"], "not a checkpoint"),
    ],
    ids=["not-an-export", "inside-the-export", "checkpoint"],
)
def test_bad_input_is_one_line(trained: Path, tmp_path: Path, capsys, args: list[str], message: str) -> None:
    argv = [a.format(run=trained / "run") for a in args]
    argv += [] if "--output" in argv else ["--output", str(tmp_path / "out")]
    assert main(["export", "--onnx", *argv]) == 2
    one_error_line(capsys, message)
    assert not (tmp_path / "out").exists() and not (trained / "run/export/onnx").exists()


def test_a_document_context_tagger_is_refused(tmp_path: Path) -> None:
    bilm = random_bilm()
    spec = random_spec(ElmoRef("o", "w", bilm_fingerprint(bilm), 0.0, False, context="document"))
    with pytest.raises(OnnxExportError, match="reads whole documents"):
        export_onnx(BiLstmCrfTagger.from_spec(spec, {"elmo": bilm}), spec, tmp_path / "onnx")
    assert not (tmp_path / "onnx").exists()


@pytest.mark.parametrize("package", ["onnxruntime", "onnx"])
def test_a_missing_package_is_one_line(trained: Path, tmp_path: Path, package: str) -> None:
    code = (
        BLOCK.format(names=(package,))
        + """
from ner_app.cli.commands import main
sys.exit(main(sys.argv[1:]))
"""
    )
    argv = ["export", "--onnx", "--model", str(trained / "run/export"), "--output", str(tmp_path / "out")]
    done = subprocess.run(
        [sys.executable, "-c", code, *argv], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        f"error: --onnx needs the packages onnx and onnxruntime ({package} not installed): pip install 'ner_app[onnx]'"
    ]
    assert not (tmp_path / "out").exists()


def test_the_predictor_refuses_a_changed_or_foreign_folder(trained: Path, tmp_path: Path) -> None:
    with pytest.raises(OnnxModelError, match="not an ONNX export"):
        OnnxPredictor(trained / "run/export")
    copy = tmp_path / "onnx"
    copy.mkdir()
    for p in (trained / "onnx").iterdir():
        copy.joinpath(p.name).write_bytes(p.read_bytes())
    data = bytearray((copy / "tagger.onnx").read_bytes())
    data[-1] ^= 1
    (copy / "tagger.onnx").write_bytes(bytes(data))
    with pytest.raises(OnnxModelError, match=r"tagger.onnx: missing or changed after export"):
        OnnxPredictor(copy)
    manifest = json.loads((copy / "onnx.json").read_text())
    manifest["sha256"] = {"../onnx.json": "0" * 64}
    (copy / "onnx.json").write_text(json.dumps(manifest))
    with pytest.raises(OnnxModelError, match=r"'../onnx.json' is not a file name inside the export"):
        OnnxPredictor(copy)
    (copy / "onnx.json").write_text('{"format": "ner_app.onnx/0"}')
    with pytest.raises(OnnxModelError, match="format 'ner_app.onnx/0' is not 'ner_app.onnx/1'"):
        OnnxPredictor(copy)
