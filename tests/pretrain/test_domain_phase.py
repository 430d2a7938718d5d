"""The domain phase of biLM pretraining (configs/bilm_domain.yaml): a document range of the corpus plus CoNLL
train text, initialisation from a trained biLM, document-context held-out perplexity, early stopping."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from ner_app.bilm.char_mapper import BOS_TOKEN, EOS_TOKEN, batch_to_ids
from ner_app.bilm.options import BilmOptions
from ner_app.bilm.weights import load_bilm
from ner_app.cli.commands import main
from ner_app.config.load import BilmPretrainConfig, load_config
from ner_app.pretrain.data import read_corpus
from ner_app.pretrain.documents import first_sentences, read_documents, split_documents
from ner_app.pretrain.heldout import document_batches, sentence_batches
from ner_app.pretrain.metrics import PretrainMetrics
from ner_app.pretrain.module import BilmLanguageModel
from ner_app.pretrain.perplexity import evaluate
from ner_app.pretrain.run import run_pretraining
from ner_app.pretrain.vocab import SoftmaxVocab
from tests.helpers import tiny_overrides, write_grammar

REPO = Path(__file__).resolve().parents[2]
TINY_CONLL = REPO / "tests" / "data" / "tiny_conll"
TINY_OPTIONS = {
    "char_dim": 4,
    "filters": [[1, 8], [2, 8]],
    "n_highway": 1,
    "activation": "relu",
    "lstm_dim": 16,
    "projection_dim": 8,
    "n_layers": 2,
    "cell_clip": 3.0,
    "proj_clip": 3.0,
    "use_skip_connections": True,
}


def options() -> dict:
    return BilmOptions(**{**TINY_OPTIONS, "filters": ((1, 8), (2, 8))}).to_dict()


# ---------------------------------------------------------------------------------------- reading
def test_split_documents_text_and_conll() -> None:
    text = ["a b", "c", "", "d e f", "", "", "g"]
    assert split_documents(text) == [[["a", "b"], ["c"]], [["d", "e", "f"]], [["g"]]]
    conll = [
        "-DOCSTART- -X- O O",
        "",
        "EU NNP I-ORG",
        "rejects VBZ O",
        "",
        "Peter NNP I-PER",
        "",
        "-DOCSTART- -X- -X- O",
        "",
        "Bonn NNP I-LOC",
    ]
    assert split_documents(conll) == [[["EU", "rejects"], ["Peter"]], [["Bonn"]]]
    docs = [[["a"], ["b"]], [["c"], ["d"], ["e"]]]
    assert first_sentences(docs, 3) == [[["a"], ["b"]], [["c"]]]
    assert first_sentences(docs, 2) == [[["a"], ["b"]]]
    assert first_sentences(docs, None) == docs


def test_read_corpus_document_range_and_extra_conll(tmp_path: Path) -> None:
    path = tmp_path / "news.txt"
    path.write_text("a b\nc\n\nd\n\ne f\ng\n\nh\n", encoding="utf-8")  # documents 0..3
    corpus = read_corpus(path, documents=[1, 3], extra=[TINY_CONLL / "train.txt"])
    conll = read_documents(TINY_CONLL / "train.txt")
    words = [corpus.types[t] for t in corpus.tokens]
    first = ["<S>", "d", "</S>", "<S>", "e", "f", "</S>", "<S>", "g", "</S>"]
    assert words[: len(first)] == first  # documents 1 and 2 of the file only
    assert corpus.num_sentences == 3 + sum(len(d) for d in conll)
    assert corpus.documents.tolist()[:3] == [0, 1, 3]  # then one document per -DOCSTART- block
    assert len(corpus.documents) == 2 + len(conll)
    conll_words = [w for d in conll for s in d for w in ["<S>", *s, "</S>"]]
    assert words[len(first) :] == conll_words
    with pytest.raises(Exception, match=r"data.train_documents must be \[first, stop\)"):
        read_corpus(path, documents=[3, 3])
    with pytest.raises(Exception, match=r"no sentences in documents \[7, 9\]"):
        read_corpus(path, documents=[7, 9])


# ----------------------------------------------------------------------- document-context perplexity
def manual_document_nll(module: BilmLanguageModel, document: list[list[str]], vocab: SoftmaxVocab) -> tuple:
    """Oracle: the document's stream <S> s1 </S> <S> s2 </S> ... through the stateless biLM by hand, every
    sentence's own predictions scored with the exact softmax."""
    stream = [w for i, s in enumerate(document) for w in ([] if i == 0 else [EOS_TOKEN, BOS_TOKEN]) + s]
    out = module.bilm(batch_to_ids([stream]))
    top, p = out.layers[-1][0], module.bilm.projection_dim  # (S+2, 2P)
    fwd_sum = bwd_sum = 0.0
    count, offset = 0, 0
    for sentence in document:
        ids = vocab.encode([BOS_TOKEN, *sentence, EOS_TOKEN])
        rows = top[offset : offset + len(ids)]
        fwd = module.softmax.full_log_probs(rows[:-1, :p])[torch.arange(len(ids) - 1), ids[1:]]
        bwd = module.softmax.full_log_probs(rows[1:, p:])[torch.arange(len(ids) - 1), ids[:-1]]
        fwd_sum -= fwd.double().sum().item()
        bwd_sum -= bwd.double().sum().item()
        count += len(ids) - 1
        offset += len(ids)
    return fwd_sum, bwd_sum, count


def test_document_perplexity_matches_a_hand_built_stream_and_one_sentence_documents_match_sentences() -> None:
    torch.manual_seed(0)
    words = "the cat sat on a mat and dog ran".split()
    vocab = SoftmaxVocab.from_counts({w: 5 for w in words}, 20)
    module = BilmLanguageModel(options(), len(vocab), num_sampled=4, dropout=0.0).eval()
    rng = np.random.default_rng(0)
    docs = [
        [[str(w) for w in rng.choice(words, size=rng.integers(1, 6))] for _ in range(k)] for k in (3, 1, 4)
    ]
    with torch.no_grad():
        fwd = bwd = 0.0
        count = 0
        for doc in docs:
            f, b, n = manual_document_nll(module, doc, vocab)
            fwd, bwd, count = fwd + f, bwd + b, count + n
        result = evaluate(module, document_batches(docs, vocab))
        assert result["predicted_tokens"] == count
        assert result["forward"] == pytest.approx(math.exp(fwd / count), rel=1e-5)
        assert result["backward"] == pytest.approx(math.exp(bwd / count), rel=1e-5)
        sentences = [s for d in docs for s in d]
        alone = evaluate(module, sentence_batches(sentences, vocab, 4))
        assert alone["predicted_tokens"] == count  # the same predictions in both contexts
        assert alone["forward"] != pytest.approx(result["forward"], rel=1e-6)  # context changes them
        singles = evaluate(module, document_batches([[s] for s in sentences], vocab))
        for key in ("forward", "backward"):
            assert singles[key] == pytest.approx(alone[key], rel=1e-6)


# ------------------------------------------------------------------------------ the config, end to end
def domain_overrides(tmp_path: Path, corpus: Path, init: Path, steps: int) -> list[str]:
    heldout = write_grammar(tmp_path / "heldout.txt", 20, seed=5, doc_every=4)
    return [
        *tiny_overrides(tmp_path, corpus, [heldout], steps),
        f"model.init_weights={init}",
        "data.train_documents=[1, 30]",
        f"data.extra_train=[{TINY_CONLL / 'train.txt'}]",
        "train.threads=1",
        "train.max_time_minutes=null",
        "train.enable_progress_bar=false",
    ]


@pytest.mark.system
def test_domain_config_runs_at_tiny_scale_from_the_shipped_biLM(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """bilm_domain.yaml as shipped (the news biLM's weights, document streams, both held-out contexts)."""
    corpus = write_grammar(tmp_path / "train.txt", 200, seed=0)
    init = REPO / "data" / "bilm_news" / "weights.hdf5"
    overrides = domain_overrides(tmp_path, corpus, init, steps=2)
    assert main(["pretrain-bilm", "--config", str(REPO / "configs" / "bilm_domain.yaml"), *overrides]) == 0
    result = PretrainMetrics.read(tmp_path / "run" / "metrics.json").heldout["heldout.txt"]
    assert result.context == "document" and set(result.contexts) == {"document", "sentence"}
    assert result.documents == 5 and result.sentences == 20
    assert result.contexts["document"]["predicted_tokens"] == result.contexts["sentence"]["predicted_tokens"]
    assert all(math.isfinite(r["mean"]) for r in result.contexts.values())
    # Round trip through the exported files: bilm-perplexity reproduces the run's own numbers.
    out = tmp_path / "ppl.json"
    args = [
        "bilm-perplexity",
        str(tmp_path / "run"),
        "--heldout",
        str(tmp_path / "heldout.txt"),
        "--json",
        str(out),
    ]
    assert main([*args, "--threads", "1"]) == 0
    again = json.loads(out.read_text())["heldout.txt"]
    capsys.readouterr()
    assert main([*args[:-1], "-", "--threads", "1"]) == 0  # --json -: stdout holds the JSON alone
    printed, err = capsys.readouterr()
    assert json.loads(printed) == json.loads(out.read_text()) and "| held-out file |" in err
    assert (again["sentences"], again["documents"]) == (20, 5)
    for context, numbers in result.contexts.items():
        for key in ("forward", "backward", "predicted_tokens"):
            assert again["contexts"][context][key] == pytest.approx(numbers[key], rel=1e-9), (context, key)


def test_bilm_perplexity_refuses_an_incomplete_or_inconsistent_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = write_grammar(tmp_path / "train.txt", 100, seed=0)
    tiny = str(REPO / "configs" / "bilm_tiny.yaml")
    assert (
        main(["pretrain-bilm", "--config", tiny, *tiny_overrides(tmp_path, corpus, [], 1), "data.heldout=[]"])
        == 0
    )
    run, heldout = tmp_path / "run", str(corpus)
    (run / "softmax.hdf5").rename(tmp_path / "softmax.hdf5")
    assert main(["bilm-perplexity", str(run), "--heldout", heldout]) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: {run / 'softmax.hdf5'}: no such file (expected a pretrain-bilm output folder)"
    )
    with h5py.File(tmp_path / "softmax.hdf5") as f, h5py.File(run / "softmax.hdf5", "w") as g:
        g.create_dataset("softmax/W", data=f["softmax/W"][:-1])  # one row short of vocab.txt
        g.create_dataset("softmax/b", data=f["softmax/b"][...])
        rows, dim = f["softmax/W"].shape
    assert main(["bilm-perplexity", str(run), "--heldout", heldout]) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: {run / 'softmax.hdf5'}: dataset 'softmax/W' has shape {(rows - 1, dim)}, expected {(rows, dim)} "
        "from vocab.txt and options.json"
    )


def test_init_weights_start_from_the_given_biLM(tmp_path: Path) -> None:
    """A run initialised from another's weights and trained one step at a negligible rate exports them back."""
    corpus = write_grammar(tmp_path / "train.txt", 200, seed=0)
    tiny = str(REPO / "configs" / "bilm_tiny.yaml")
    base = [*tiny_overrides(tmp_path / "a", corpus, [], 4), "data.heldout=[]"]
    assert main(["pretrain-bilm", "--config", tiny, *base]) == 0
    source = tmp_path / "a" / "run"
    again = [
        *tiny_overrides(tmp_path / "b", corpus, [], 1),
        "data.heldout=[]",
        "train.lr=1e-12",
        f"model.init_weights={source / 'weights.hdf5'}",
    ]
    assert main(["pretrain-bilm", "--config", tiny, *again]) == 0
    first = load_bilm(source / "options.json", source / "weights.hdf5").state_dict()
    second = load_bilm(tmp_path / "b" / "run" / "options.json", tmp_path / "b" / "run" / "weights.hdf5")
    for name, value in second.state_dict().items():
        assert torch.allclose(value, first[name], atol=1e-6), name
    fresh = [*tiny_overrides(tmp_path / "c", corpus, [], 1), "data.heldout=[]", "train.lr=1e-12"]
    assert main(["pretrain-bilm", "--config", tiny, *fresh]) == 0
    third = load_bilm(tmp_path / "c" / "run" / "options.json", tmp_path / "c" / "run" / "weights.hdf5")
    assert not all(torch.allclose(v, first[k], atol=1e-3) for k, v in third.state_dict().items())


def test_init_weights_of_another_architecture_is_one_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = write_grammar(tmp_path / "train.txt", 50, seed=0)
    tiny = str(REPO / "configs" / "bilm_tiny.yaml")
    shipped = REPO / "data" / "bilm" / "weights.hdf5"  # 512-channel char CNN: not bilm_tiny's options
    args = [*tiny_overrides(tmp_path, corpus, [], 1), "data.heldout=[]", f"model.init_weights={shipped}"]
    assert main(["pretrain-bilm", "--config", tiny, *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {shipped}: ")


def test_extra_train_that_is_held_out_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = write_grammar(tmp_path / "train.txt", 50, seed=0)
    dev = TINY_CONLL / "valid.txt"
    args = [*tiny_overrides(tmp_path, corpus, [dev], 1), f"data.extra_train=[{dev}]"]
    assert main(["pretrain-bilm", "--config", str(REPO / "configs" / "bilm_tiny.yaml"), *args]) == 2
    assert (
        f"config key 'data.extra_train': {dev} is also a held-out file (data.heldout)"
        in capsys.readouterr().err
    )


def test_early_stopping_exports_the_best_validation(tmp_path: Path) -> None:
    """Validation every step at a learning rate that overshoots: training stops `patience` validations after
    the best, and the exported weights are the best step's (their held-out perplexity is the best one)."""
    corpus = write_grammar(tmp_path / "train.txt", 300, seed=0)
    heldout = write_grammar(tmp_path / "heldout.txt", 30, seed=1)
    overrides = [
        *tiny_overrides(tmp_path, corpus, [heldout], 60),
        "train.val_every_n_steps=1",
        "train.val_max_sentences=null",
        "train.patience=2",
        "train.lr=0.3",
    ]
    cfg = load_config(REPO / "configs" / "bilm_tiny.yaml", overrides, schema=BilmPretrainConfig)
    metrics = run_pretraining(cfg)
    with (tmp_path / "run" / "logs" / "metrics.csv").open() as f:
        vals = [(int(r["step"]), float(r["val_ppl"])) for r in csv.DictReader(f) if r.get("val_ppl")]
    best_step, best_ppl = min(vals, key=lambda v: v[1])
    assert metrics["steps"] < 60, "the learning rate was meant to overshoot and stop the run early"
    assert metrics["steps"] == vals[-1][0] + 1 and len([v for v in vals if v[0] > best_step]) == 2
    assert metrics["exported_step"] == best_step + 1  # Lightning logs a validation at step - 1
    assert metrics["heldout"]["heldout.txt"]["mean"] == pytest.approx(best_ppl, rel=1e-6)


def test_frozen_bilm_steps_train_the_softmax_alone(tmp_path: Path) -> None:
    """train.frozen_bilm_steps=3: after 3 steps the biLM is exactly its init weights while the softmax moved;
    with 1 frozen step of 3 the biLM moves too."""
    corpus = write_grammar(tmp_path / "train.txt", 200, seed=0)
    tiny = str(REPO / "configs" / "bilm_tiny.yaml")
    assert (
        main(
            [
                "pretrain-bilm",
                "--config",
                tiny,
                *tiny_overrides(tmp_path / "a", corpus, [], 4),
                "data.heldout=[]",
            ]
        )
        == 0
    )
    source = tmp_path / "a" / "run"
    init = load_bilm(source / "options.json", source / "weights.hdf5").state_dict()

    def run(name: str, frozen: int, lr: float) -> tuple[dict[str, torch.Tensor], np.ndarray]:
        args = [
            *tiny_overrides(tmp_path / name, corpus, [], 3),
            "data.heldout=[]",
            f"train.lr={lr}",
            f"model.init_weights={source / 'weights.hdf5'}",
            f"train.frozen_bilm_steps={frozen}",
        ]
        assert main(["pretrain-bilm", "--config", tiny, *args]) == 0
        out = tmp_path / name / "run"
        with h5py.File(out / "softmax.hdf5", "r") as f:
            softmax = f["softmax/W"][...]
        return load_bilm(out / "options.json", out / "weights.hdf5").state_dict(), softmax

    frozen, softmax = run("frozen", 3, 0.3)
    for name, value in frozen.items():
        assert torch.equal(value, init[name]), name
    _, untrained_softmax = run("still", 3, 1e-12)  # the same seed: the same fresh softmax, barely trained
    assert np.abs(softmax - untrained_softmax).max() > 1e-3
    thawed, _ = run("thawed", 1, 0.3)
    assert not all(torch.equal(v, init[k]) for k, v in thawed.items())


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["train.frozen_bilm_steps=-1"], "config key 'train.frozen_bilm_steps' must be at least 0, found -1"),
        (
            ["train.frozen_bilm_steps=5", "train.devices=2", "train.strategy=ddp"],
            "config key 'train.frozen_bilm_steps' needs one process (train.devices x train.num_nodes = 1), found 2",
        ),
    ],
)
def test_bad_frozen_bilm_steps_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], overrides: list[str], message: str
) -> None:
    corpus = write_grammar(tmp_path / "train.txt", 50, seed=0)
    args = [*tiny_overrides(tmp_path, corpus, [], 1), "data.heldout=[]", *overrides]
    assert main(["pretrain-bilm", "--config", str(REPO / "configs" / "bilm_tiny.yaml"), *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: {message}"]
