"""Exact held-out perplexity of an exported biLM language model (``pretrain-bilm``'s output folder).

The folder holds the biLM (``options.json``, ``weights.hdf5``), its LM head (``softmax.hdf5``) and the softmax
vocabulary (``vocab.txt``): together the two language models, which ``bilm-perplexity`` scores on any held-out
file, sentence by sentence or as document streams (``heldout.py``), with the same code as the run's own
``metrics.json``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytorch_lightning as pl

from ner_app.bilm.options import read_options
from ner_app.bilm.weights import load_weights, precheck_weights
from ner_app.errors import MissingFileError
from ner_app.pretrain.batches import EvaluationBatch
from ner_app.pretrain.documents import read_documents
from ner_app.pretrain.heldout import BatchIterable, context_batches, shard_batches
from ner_app.pretrain.metrics import Perplexity
from ner_app.pretrain.module import BilmLanguageModel
from ner_app.pretrain.softmax_file import SOFTMAX_FILE, load_softmax
from ner_app.pretrain.vocab import SoftmaxVocab
from ner_app.runtime.trainer import evaluation_trainer


def evaluate(
    module: BilmLanguageModel, batches: list[EvaluationBatch], trainer: pl.Trainer | None = None
) -> Perplexity:
    """Exact perplexity of held-out batches (``heldout.context_batches``) through Lightning's validation loop:
    forward, backward, mean, and the predicted tokens per direction. Under DDP every process calls it with the
    same batches and validates its share; the per-batch sums are gathered and added in batch order, so the
    result is the one-process number. Without ``trainer``: one CPU process (``evaluation_trainer``)."""
    trainer = trainer if trainer is not None else evaluation_trainer()
    shard = shard_batches(batches, trainer.global_rank, trainer.world_size)
    trainer.validate(module, dataloaders=BatchIterable(shard), verbose=False)
    if module.perplexity is None:
        raise ValueError("no held-out sentences to evaluate")
    return module.perplexity


def load_language_model(run_dir: str | Path) -> tuple[BilmLanguageModel, SoftmaxVocab]:
    """The two LMs of an exported run folder, in eval mode, and their vocabulary; one clear error per defect."""
    run_dir = Path(run_dir)
    for name in ("options.json", "weights.hdf5", SOFTMAX_FILE, "vocab.txt"):
        if not (run_dir / name).is_file():
            raise MissingFileError(f"{run_dir / name}: no such file (expected a pretrain-bilm output folder)")
    options = read_options(run_dir / "options.json")
    precheck_weights(options, run_dir / "weights.hdf5")  # sizes against the file before any allocation
    vocab = SoftmaxVocab.load(run_dir / "vocab.txt")
    module = BilmLanguageModel(options.to_dict(), len(vocab), num_sampled=1, dropout=0.0)
    load_weights(module.bilm, run_dir / "weights.hdf5")
    load_softmax(module.softmax, run_dir / SOFTMAX_FILE)
    return module.eval(), vocab


def heldout_perplexities(
    run_dir: str | Path,
    files: Sequence[str | Path],
    contexts: Sequence[str] = ("sentence", "document"),
    max_sentences: int | None = None,
    batch_size: int = 64,
) -> dict[str, dict[str, Any]]:
    """{file name: {path, sentences, documents, contexts: {context: perplexities}}} for every file."""
    module, vocab = load_language_model(run_dir)
    trainer = evaluation_trainer()
    results = {}
    for path in files:
        documents = read_documents(path, max_sentences)
        results[Path(path).name] = {
            "path": str(path),
            "sentences": sum(len(d) for d in documents),
            "documents": len(documents),
            "contexts": {
                c: evaluate(module, context_batches(documents, vocab, c, batch_size), trainer)
                for c in contexts
            },
        }
    return results
