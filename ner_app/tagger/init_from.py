"""Continue training a trained tagger on new data (``train --init-from EXPORT``), as plain functions.

The new tagger's spec extends the old one's (``extended_spec``): every old word, character and tag stays,
and what the new training data adds (words, characters, the tags of new entity types) joins it. The new
tagger is built and initialised as a fresh one would be (GloVe where configured); then ``carried_state``
copies every old weight into it: whole tensors where the shapes do not depend on a vocabulary, and the rows
(for the CRF's transitions, the entries) of every old word, character and tag where they do. New rows and
the transitions from, to, into or out of a new tag keep their fresh values. The architecture must be the
export's (``check_compatible``); the training scheme too, while the files of the new data may be in any.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import torch

from ner_app.errors import NerAppError
from ner_app.tagger.spec import TaggerSpec, VocabSpec
from ner_app.text.tags import entity_types, scheme_tags

# The tensors whose dimensions index a vocabulary: per dimension, which one (None: not a vocabulary); the
# tagger's own here, each input feature's in its ``vocab_axes`` and ``joined_rows``.
WORDS, CHARS, TAGS = "words", "chars", "tags"
VOCAB_AXES: dict[str, tuple[str | None, ...]] = {
    "output.weight": (TAGS, None),  # (K, H)
    "output.bias": (TAGS,),  # (K,)
    "crf.start_transitions": (TAGS,),  # (K,)
    "crf.end_transitions": (TAGS,),  # (K,)
    "crf.transitions": (TAGS, TAGS),  # (K, K): from tag i to tag j
}


class InitFromError(NerAppError):
    """An export that cannot start this run: another architecture, biLM or training scheme."""


def check_compatible(old: TaggerSpec, new: TaggerSpec, source: str) -> None:
    """The settings that fix the shape or meaning of the export's weights must be the run's: sizes (dropout
    aside), the word vocabulary's lowercasing, the training scheme, the char CNN's width and the biLM with its
    mix settings. One ``InitFromError`` naming the config key, the run's value and the export's."""

    def refuse(key: str, run: object, export: object, fix: str = "") -> InitFromError:
        return InitFromError(
            f"{source}: {key} is {run!r} in this run but {export!r} in the export"
            f"{fix or f'; set {key}={export} to continue training it'}"
        )

    for f in dataclasses.fields(old.sizes):
        a, b = getattr(new.sizes, f.name), getattr(old.sizes, f.name)
        if f.name != "dropout" and a != b:
            raise refuse(f"model.{f.name}", a, b)
    if new.words.lowercase != old.words.lowercase:
        raise refuse("data.lowercase", new.words.lowercase, old.words.lowercase)
    if new.scheme != old.scheme:
        raise refuse("data.scheme", new.scheme, old.scheme)
    if new.max_word_chars != old.max_word_chars:
        raise refuse("max_word_chars", new.max_word_chars, old.max_word_chars, " (export it again)")
    names, old_names = [f.name for f in new.features], [f.name for f in old.features]
    if names != old_names:
        if [n for n in names if n != "elmo"] == [n for n in old_names if n != "elmo"]:  # the config's switch
            raise refuse("elmo.enabled", "elmo" in names, "elmo" in old_names)
        raise refuse(
            "model.features", names, old_names, f"; set model.features={old_names} to continue training it"
        )
    for feature, before in zip(new.features, old.features, strict=True):
        problem = feature.continues(before, source)
        if problem:
            raise InitFromError(f"{source}: {problem}")


def _extend(old: Sequence[str], new: Sequence[str]) -> tuple[str, ...]:
    """``old`` in its order, then the entries of ``new`` it lacks, in theirs."""
    return tuple(dict.fromkeys([*old, *new]))


def extended_spec(old: TaggerSpec, new: TaggerSpec) -> TaggerSpec:
    """The spec of the continued tagger: ``new`` (the run's spec from its own training data) with every word,
    character and entity type of ``old`` kept. Trainable words: the old ones, then the new data's; frozen
    words: the old and new pretrained words that are not trainable (an old frozen word that the new data
    trains on becomes trainable, and starts from its frozen vector). Tags: every tag of the scheme for the
    old and new entity types, in the order training builds them."""
    old_train, new_train = old.num_trainable_words - 2, new.num_trainable_words - 2  # minus <pad>, <unk>
    trainable = _extend(old.words.tokens[:old_train], new.words.tokens[:new_train])
    known = set(trainable)
    frozen = [
        w for w in _extend(old.words.tokens[old_train:], new.words.tokens[new_train:]) if w not in known
    ]
    types = set(entity_types(old.tags.tokens)) | set(entity_types(new.tags.tokens))
    return dataclasses.replace(
        new,
        words=VocabSpec((*trainable, *frozen), True, new.words.lowercase),
        num_trainable_words=len(trainable) + 2,
        chars=VocabSpec(_extend(old.chars.tokens, new.chars.tokens), old.chars.specials, old.chars.lowercase),
        tags=VocabSpec(tuple(scheme_tags(new.scheme, types)), False, False),
    )


def row_sources(old: Sequence[str], new: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """Positions (N,) in ``new`` of the entries ``old`` has too, and their positions (N,) in ``old``."""
    where = {entry: i for i, entry in enumerate(old)}
    pairs = [(i, where[entry]) for i, entry in enumerate(new) if entry in where]
    to, source = zip(*pairs, strict=True) if pairs else ((), ())
    return torch.tensor(to, dtype=torch.long), torch.tensor(source, dtype=torch.long)


def carry(
    old: torch.Tensor, new: torch.Tensor, axes: Sequence[tuple[torch.Tensor, torch.Tensor] | None]
) -> torch.Tensor:
    """``new`` with the entries that exist in ``old`` copied from it. ``axes`` has one entry per dimension:
    (new positions, old positions) of a vocabulary dimension, or None for a dimension both share whole."""
    out = new.detach().clone()
    index_new, index_old = [], []
    for dim, axis in enumerate(axes):
        if axis is None:
            if old.shape[dim] != new.shape[dim]:
                raise InitFromError(f"a dimension of size {old.shape[dim]} became {new.shape[dim]}")
            axis = (torch.arange(new.shape[dim]), torch.arange(old.shape[dim]))
        shape = [1] * len(axes)  # broadcast each dimension's index against the others (an outer product)
        shape[dim] = -1
        index_new.append(axis[0].reshape(shape))
        index_old.append(axis[1].reshape(shape))
    out[tuple(index_new)] = old[tuple(index_old)].to(out.dtype)
    return out


def carried_state(
    old_state: dict[str, torch.Tensor],
    old_spec: TaggerSpec,
    new_state: dict[str, torch.Tensor],
    new_spec: TaggerSpec,
    source: str,
) -> dict[str, torch.Tensor]:
    """The trained state of the continued tagger: ``new_state`` (a fresh tagger of ``new_spec``) with every
    weight of ``old_state`` (the export's, ``old_spec``) copied into the rows of the same word, character and
    tag, and every tensor without a vocabulary dimension copied whole (it must have the same shape)."""
    axes_of = dict(VOCAB_AXES)
    joined: dict[tuple[str, ...], str] = {}
    for feature in new_spec.features:
        axes_of.update(feature.vocab_axes)
        joined.update(feature.joined_rows)
    maps = {
        WORDS: row_sources(old_spec.word_vocab.itos, new_spec.word_vocab.itos),
        CHARS: row_sources(old_spec.char_vocab.itos, new_spec.char_vocab.itos),
        TAGS: row_sources(old_spec.tag_vocab.itos, new_spec.tag_vocab.itos),
    }
    unknown = sorted(set(old_state) ^ set(new_state))
    if unknown:
        raise InitFromError(
            f"{source}: the export's tensors differ from this tagger's ({', '.join(unknown[:3])})"
        )
    out = {}
    in_rows = {key for keys in joined for key in keys}
    for key, value in new_state.items():
        if key in in_rows:
            continue
        axes = axes_of.get(key, (None,) * value.dim())
        if len(axes) != value.dim() or old_state[key].dim() != value.dim():
            raise InitFromError(
                f"{source}: tensor {key} has {old_state[key].dim()} dimensions, expected {value.dim()}"
            )
        try:
            out[key] = carry(old_state[key], value, [None if a is None else maps[a] for a in axes])
        except InitFromError as err:
            raise InitFromError(f"{source}: tensor {key}: {err}") from None
    # tensors that are one vocabulary's rows together (the trainable words, then the frozen ones): one (V, D)
    # matrix on each side, cut back at the new tensors' sizes
    for keys, vocab in joined.items():
        rows = carry(
            torch.cat([old_state[k] for k in keys]),
            torch.cat([new_state[k] for k in keys]),
            [maps[vocab], None],
        )
        start = 0
        for key in keys:
            n = new_state[key].shape[0]
            out[key] = rows[start : start + n].clone()
            start += n
    return out
