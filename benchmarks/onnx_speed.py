"""Time the ONNX export (onnxruntime + numpy) against the torch predictor on CPU, side by side.

    nice python -m benchmarks.onnx_speed [--threads N] [--repeats R] [--sentences N]

The tagger has the shape of configs/conll2003_elmo.yaml (GloVe-sized word vocabulary where the GloVe package is
installed, char CNN, 2 x 200 BiLSTM, ELMo at the input) with the shipped biLM (data/bilm); its vocabulary
comes from CoNLL-2003 train (the tiny corpus without ../shared) and its weights are seeded random: speed does
not depend on their values. It is written as an export (``export_model``), loaded by ``Predictor`` (torch)
and converted by ``export_onnx_from`` (timed), whose folder ``OnnxPredictor`` loads. Timed, each in R rounds
with the two implementations in turn (``common.interleaved``): loading, tagging the CoNLL-2003 dev sentences
(or synthetic ones) end to end, and the parts on one batch of 64 sentences of the median length, as
predict batches them. Prints markdown tables of medians.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import onnxruntime
import torch
from torch.utils.benchmark import Measurement

from benchmarks.common import ROOT, SHARED, interleaved, machine, make_sentences, print_table
from ner_app.bilm.bilm import add_sentence_boundaries
from ner_app.bilm.weights import bilm_fingerprint, load_bilm
from ner_app.config.load import load_config
from ner_app.onnx.crf import marginals, viterbi
from ner_app.onnx.export import export_onnx_from
from ner_app.onnx.predictor import OnnxPredictor
from ner_app.predict.predictor import Predictor
from ner_app.tagger.batch import encode_batch
from ner_app.tagger.export import export_model
from ner_app.tagger.model import BiLstmCrfTagger
from ner_app.tagger.spec import ElmoRef, TaggerSizes, TaggerSpec
from ner_app.text.conll import read_conll
from ner_app.text.tags import convert

CONFIG = ROOT / "configs" / "conll2003_elmo.yaml"


def build_export(folder: Path) -> tuple[Path, str]:
    """An export of the config's shape with random weights; and where its vocabulary came from."""
    cfg = load_config(CONFIG)
    m = cfg.model
    data = SHARED / "data" / "conll2003"
    source = data if (data / "train.txt").is_file() else ROOT / "tests" / "data" / "tiny_conll"
    train = read_conll(source / "train.txt")
    glove = None
    try:
        from ner_app.tagger.glove import embedding_matrix, load_glove

        glove = load_glove("package", m.word_dim)
    except Exception as err:  # noqa: BLE001  # any failure: no GloVe rows, said in the table's header
        print(f"(no GloVe package: {err})")
    bilm = load_bilm(ROOT / "data/bilm/options.json", ROOT / "data/bilm/weights.hdf5")
    elmo = ElmoRef("options.json", "weights.hdf5", bilm_fingerprint(bilm), dropout=0.0, do_layer_norm=False)
    shape = TaggerSizes(
        m.word_dim, m.char_dim, m.char_filters, m.char_width, m.lstm_hidden, m.lstm_layers, m.dropout
    )
    tags = [convert(s.tags, "IOB1", "BIOES") for s in train]
    words = glove[0] if glove is not None else ()
    spec = TaggerSpec.from_training_data(
        shape, [s.tokens for s in train], tags, "BIOES", "IOB1", pretrained_words=words, elmo=elmo
    )
    torch.manual_seed(0)
    tagger = BiLstmCrfTagger.from_spec(spec, {"elmo": bilm})
    if (
        glove is not None
    ):  # GloVe's rows, as training starts from them (the export then refers to the package)
        tagger.feature("words").init_word_embeddings(
            embedding_matrix(spec.word_vocab, *glove, m.word_dim, seed=0)[0]
        )
    export_model(tagger, spec, folder)
    what = f"{len(spec.word_vocab):,} words ({len(spec.word_vocab) - spec.num_trainable_words:,} frozen GloVe rows)"
    return folder, f"vocabulary of {source.name} train, {what}"


def sizes(folder: Path) -> str:
    def size(n: int) -> str:
        return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n / 2**10:.1f} KiB"

    return ", ".join(f"{p.name} {size(p.stat().st_size)}" for p in sorted(folder.iterdir()) if p.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=1, help="torch and onnxruntime threads (default 1)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sentences", type=int, help="only the first N dev sentences")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    dev = SHARED / "data" / "conll2003" / "valid.txt"
    sentences = [s.tokens for s in read_conll(dev)] if dev.is_file() else make_sentences(3250)
    sentences = sentences[: args.sentences] if args.sentences else sentences
    name = f"{'CoNLL-2003 dev' if dev.is_file() else 'synthetic'}: {len(sentences):,} sentences, "
    name += f"{sum(map(len, sentences)):,} tokens"
    with tempfile.TemporaryDirectory() as tmp:
        export, vocabulary = build_export(Path(tmp) / "export")
        start = time.perf_counter()
        onnx_dir = export_onnx_from(export, Path(tmp) / "onnx")
        export_seconds = time.perf_counter() - start
        print(f"{machine()}; onnxruntime {onnxruntime.__version__}, {args.threads} thread(s)")
        print(f"tagger: configs/conll2003_elmo.yaml's shape, shipped biLM, {vocabulary}")
        print(f"export: {sizes(export)}")
        print(f"ONNX: {sizes(onnx_dir)}; export --onnx took {export_seconds:.1f} s\n")

        loads = interleaved(
            {
                "torch": lambda: Predictor.from_export(export),
                "onnx": lambda: OnnxPredictor(onnx_dir, threads=args.threads),
            },
            args.repeats,
        )
        torch_predictor = Predictor.from_export(export)
        onnx = OnnxPredictor(onnx_dir, threads=args.threads)
        if [t for t, _ in torch_predictor.tag(sentences)] != [t for t, _ in onnx.tag(sentences)]:
            raise RuntimeError("the ONNX predictor's tags differ from the torch predictor's")
        tagging = interleaved(
            {"torch": lambda: torch_predictor.tag(sentences), "onnx": lambda: onnx.tag(sentences)},
            args.repeats,
        )
        rows = [("load the model", loads), (f"tag all ({name})", tagging)]
        by_length = sorted(sentences, key=len)  # predict's batches are sentences of similar length
        middle = len(by_length) // 2
        rows += parts(torch_predictor, onnx, by_length[middle : middle + 64], args.repeats)
        rows += parts(torch_predictor, onnx, sentences[:64], args.repeats, mixed=True)[:1]
    print_table(
        ["step", "torch (ms)", "onnxruntime + numpy (ms)", "torch / onnx"],
        (
            (
                step,
                f"{1000 * t['torch'].median:,.1f}",
                f"{1000 * t['onnx'].median:,.1f}",
                f"{t['torch'].median / t['onnx'].median:.2f}",
            )
            for step, t in rows
        ),
    )


def parts(
    torch_predictor: Predictor, onnx: OnnxPredictor, batch: list[list[str]], repeats: int, mixed: bool = False
) -> list[tuple[str, dict[str, Measurement]]]:
    """The parts on one batch: the biLM, the tagger from the biLM's layers, and the CRF (decode + marginals).
    ``mixed``: the batch is the first sentences in file order (mixed lengths), not one predict would make."""
    tagger, spec = torch_predictor.tagger, torch_predictor.spec
    assert onnx.bilm_graph is not None
    bilm = tagger.feature("elmo").elmo.bilm
    encoded = encode_batch(batch, spec)
    inputs = encoded["features"]
    with torch.no_grad():
        out = bilm(inputs["elmo"]["chars"])
        cached = {**encoded, "features": {**inputs, "elmo": {"layers": out.layers, "mask": out.mask}}}
        emissions = tagger.emissions(cached)
    char_ids = add_sentence_boundaries(inputs["elmo"]["chars"])[0].numpy()
    layers = onnx.bilm_graph.run(None, {"char_ids": char_ids})[0]
    feeds = {
        "words": inputs["words"]["ids"].numpy(),
        "chars": inputs["chars"]["ids"].numpy(),
        "layers": layers,
    }
    lengths, scores = encoded["mask"].sum(1).numpy(), emissions.numpy()

    @torch.no_grad()
    def torch_crf() -> None:
        tagger.crf.decode(emissions, encoded["mask"])
        tagger.crf.marginals(emissions, encoded["mask"])

    def numpy_crf() -> None:
        viterbi(scores, lengths, *onnx.crf)
        marginals(scores, lengths, *onnx.crf)

    tokens = int(encoded["mask"].sum())
    kind = "mixed lengths (the first sentences)" if mixed else "the median length"
    steps = {
        f"biLM, one batch of {kind} ({len(batch)} sentences, {tokens} tokens)": (
            lambda: torch.no_grad()(bilm)(inputs["elmo"]["chars"]),
            lambda: onnx.bilm_graph.run(None, {"char_ids": char_ids}),
        ),
        "tagger from the biLM's layers, one batch": (
            lambda: torch.no_grad()(tagger.emissions)(cached),
            lambda: onnx.tagger_graph.run(None, feeds),
        ),
        "CRF Viterbi + marginals, one batch": (torch_crf, numpy_crf),
    }
    return [
        (step, interleaved({"torch": a, "onnx": b}, repeats, warmup=2, min_run_time=0.5))
        for step, (a, b) in steps.items()
    ]


if __name__ == "__main__":
    main()
