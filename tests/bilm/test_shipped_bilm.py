"""The biLMs shipped in ``data/``: ``data/bilm`` (``configs/bilm_news.yaml``, then the domain phase of
``configs/bilm_domain.yaml``), the default of ``conll2003_elmo.yaml``, and ``data/bilm_news`` (the news phase
alone, the domain phase's start). Each loads, round-trips, and behaves like a trained language model's encoder
should."""

from pathlib import Path

import pytest
import torch

from ner_app.bilm import batch_to_ids, load_bilm, read_options, save_bilm
from ner_app.config.load import BilmPretrainConfig, load_config
from ner_app.pretrain.metrics import PretrainMetrics

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "data" / "bilm"
NEWS = ROOT / "data" / "bilm_news"
BOTH = pytest.mark.parametrize("folder", [SHIPPED, NEWS], ids=["bilm", "bilm_news"])


def shipped(folder: Path = SHIPPED):
    return load_bilm(folder / "options.json", folder / "weights.hdf5").eval()


def test_shipped_bilm_is_the_elmo_default_and_loads() -> None:
    cfg = load_config(ROOT / "configs" / "conll2003_elmo.yaml")
    assert (ROOT / cfg.elmo.options).resolve() == (SHIPPED / "options.json").resolve()
    assert (ROOT / cfg.elmo.weights).resolve() == (SHIPPED / "weights.hdf5").resolve()
    init = load_config(ROOT / "configs" / "bilm_domain.yaml", schema=BilmPretrainConfig).model.init_weights
    assert (
        init is not None and (ROOT / init).resolve() == (NEWS / "weights.hdf5").resolve()
    )  # the domain phase starts from the news biLM


@BOTH
def test_shipped_bilm_loads_and_its_record_matches(folder: Path) -> None:
    options = read_options(folder / "options.json")
    metrics = PretrainMetrics.read(folder / "metrics.json")
    bilm = shipped(folder)
    assert sum(p.numel() for p in bilm.parameters()) == options.num_parameters() == metrics.parameters
    assert bilm.num_layers == 3 and bilm.output_dim == 256
    # a trained model: every held-out perplexity recorded is finite and far below the 50k-word uniform
    for scores in metrics.heldout.values():
        for result in scores.contexts.values():
            assert 1.0 < result["forward"] < 1000.0 and 1.0 < result["backward"] < 1000.0


@BOTH
def test_shipped_bilm_round_trips_exactly(tmp_path: Path, folder: Path) -> None:
    bilm = shipped(folder)
    options, weights = save_bilm(bilm, tmp_path)
    again = load_bilm(options, weights).eval()
    for (name, a), (_, b) in zip(bilm.state_dict().items(), again.state_dict().items(), strict=True):
        torch.testing.assert_close(b, a, atol=0, rtol=0, msg=name)
    ids = batch_to_ids([["EU", "rejects", "German", "call", "."]])
    with torch.no_grad():
        for x, y in zip(bilm(ids).layers, again(ids).layers, strict=True):
            torch.testing.assert_close(y, x, atol=0, rtol=0)


@BOTH
def test_shipped_bilm_sentence_alone_equals_padded_batch(folder: Path) -> None:
    bilm = shipped(folder)
    sentences = [
        ["Peter", "Blackburn"],
        ["BRUSSELS", "1996-08-22", "The", "European", "Commission", "said", "."],
    ]
    with torch.no_grad():
        batch = bilm(batch_to_ids(sentences))
        alone = bilm(batch_to_ids(sentences[:1]))
    n = len(sentences[0]) + 2  # with <S> and </S>
    for together, single in zip(batch.layers, alone.layers, strict=True):
        torch.testing.assert_close(together[0, :n], single[0], atol=1e-6, rtol=1e-5)
        assert together[0, n:].abs().max() == 0  # padding stays zero


@BOTH
def test_shipped_bilm_layers_are_contextual(folder: Path) -> None:
    """Layer 0 depends on the token only; the LSTM layers see the context (a trained LM must use it)."""
    bilm = shipped(folder)
    a = [["He", "went", "to", "Washington", "yesterday"]]
    b = [["George", "Washington", "was", "president", "yesterday"]]
    with torch.no_grad():
        la, lb = bilm(batch_to_ids(a)).layers, bilm(batch_to_ids(b)).layers
    # "Washington" is token 4 of a and token 2 of b (after <S>)
    torch.testing.assert_close(la[0][0, 4], lb[0][0, 2], atol=1e-6, rtol=1e-5)
    for layer in (1, 2):
        assert (la[layer][0, 4] - lb[layer][0, 2]).abs().max() > 1e-2
