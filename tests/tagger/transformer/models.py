"""Tiny random Hugging Face encoders (a BERT and a RoBERTa), built from a config and written with
``save_pretrained``: real folders, as a user's would be, without a network."""

from __future__ import annotations

from pathlib import Path

import pytest

transformers = pytest.importorskip("transformers")

LETTERS = "abcdefghijklmnopqrstuvwxyz"
WORDS = ["eu", "german", "call", "the", "to", "boycott", "british", "lamb", "peter", "blackburn", "."]


def tiny_bert(folder: Path, seed: int = 0, max_positions: int = 64) -> Path:
    """A 2-layer, 16-wide BERT with a word-piece vocabulary of letters, '##' letters and a few words."""
    import torch

    vocab = [
        "[PAD]",
        "[UNK]",
        "[CLS]",
        "[SEP]",
        "[MASK]",
        *LETTERS,
        ",",
        ".",
        *(f"##{c}" for c in LETTERS),
        *WORDS[:-1],
    ]
    tokenizer = transformers.BertTokenizer(vocab={p: i for i, p in enumerate(vocab)})
    torch.manual_seed(seed)
    config = transformers.BertConfig(
        vocab_size=len(vocab),
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=max_positions,
    )
    model = transformers.BertModel(config)
    tokenizer.save_pretrained(folder)
    model.save_pretrained(folder)
    return folder


def tiny_roberta(folder: Path, seed: int = 0) -> Path:
    """A 2-layer, 16-wide RoBERTa with a byte-level BPE of single bytes and a few merges."""
    import torch
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    symbols = list(bytes_to_unicode().values())
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
    for s in symbols:
        vocab.setdefault(s, len(vocab))
    merges = [("Ġ", "t"), ("Ġt", "h"), ("Ġth", "e"), ("e", "r"), ("a", "n")]
    for merge in merges:
        vocab.setdefault("".join(merge), len(vocab))
    vocab["<mask>"] = len(vocab)
    tokenizer = transformers.RobertaTokenizer(vocab=vocab, merges=merges, add_prefix_space=True)
    torch.manual_seed(seed)
    config = transformers.RobertaConfig(
        vocab_size=len(vocab),
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=66,
        pad_token_id=1,
    )
    model = transformers.RobertaModel(config)
    tokenizer.save_pretrained(folder)
    model.save_pretrained(folder)
    return folder
