"""ELMo's bidirectional language model (Peters et al. 2018), exact to the reference implementation."""

from ner_app.bilm.bilm import BidirectionalLM, BiLMOutput, add_sentence_boundaries, remove_sentence_boundaries
from ner_app.bilm.char_mapper import batch_to_ids, token_to_ids
from ner_app.bilm.elmo import Elmo, ElmoOutput
from ner_app.bilm.options import BilmOptions, OptionsError, read_options, write_options
from ner_app.bilm.scalar_mix import ScalarMix
from ner_app.bilm.weights import (
    WeightFileError,
    bilm_fingerprint,
    load_bilm,
    load_weights,
    save_bilm,
    save_weights,
)

__all__ = [
    "BidirectionalLM",
    "BiLMOutput",
    "BilmOptions",
    "Elmo",
    "ElmoOutput",
    "OptionsError",
    "ScalarMix",
    "WeightFileError",
    "add_sentence_boundaries",
    "batch_to_ids",
    "bilm_fingerprint",
    "load_bilm",
    "load_weights",
    "read_options",
    "remove_sentence_boundaries",
    "save_bilm",
    "save_weights",
    "token_to_ids",
    "write_options",
]
