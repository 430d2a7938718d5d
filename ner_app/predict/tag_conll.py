"""CoNLL token lines (or raw text given where tokens were expected) tagged by any predictor: a torch export's
``Predictor``, an ONNX folder's ``OnnxPredictor`` or ``predict --workers``'s ``GroupTagger``. No torch here:
only the predictor's ``tag`` and ``to_source`` are called."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Protocol

from ner_app.text.conll import DOCSTART, conll_blocks
from ner_app.text.pieces import MAX_TOKENS
from ner_app.text.predictions import ConllItem, TaggedSentence
from ner_app.text.tokenizer import sentences as split_sentences


class SentenceTagger(Protocol):
    """What ``tag_conll`` needs of a predictor."""

    def tag(
        self, sentences: Sequence[Sequence[str]], documents: Sequence[int] | None = None
    ) -> list[tuple[list[str], list[float]]]: ...

    def to_source(self, tags: Sequence[str]) -> list[str]: ...


def tag_conll(
    predictor: SentenceTagger, lines: Iterable[str], tokens: bool | None = None
) -> Iterator[ConllItem]:
    """A ``TaggedSentence`` (the predicted tags, original scheme) per sentence of CoNLL token lines; other lines
    pass through as they are.

    ``-DOCSTART-`` lines separate documents; a file without any is one document (document context reads it
    in chunks of ``max_stream_positions``). Input that is raw text rather than token lines (``is_token_lines``)
    is tokenised first, with the tokenizer of the other formats: each line's sentences become ``token tag``
    lines, a blank line after each input line, and a line is one document. ``tokens`` says which the lines
    are when the caller knows (None: detected)."""
    blocks = list(conll_blocks(lines))
    if not (is_token_lines(blocks) if tokens is None else tokens):
        yield from _tag_text_as_conll(predictor, _lines(blocks))
        return
    is_sentence = [bool(b[0].strip()) and not b[0].startswith(DOCSTART) for b in blocks]
    sentences = [[line.split()[0] for line in b] for b, s in zip(blocks, is_sentence, strict=True) if s]
    documents, doc = [], 0
    for block, sentence in zip(blocks, is_sentence, strict=True):
        if sentence:
            documents.append(doc)
        elif block[0].startswith(DOCSTART):
            doc += 1
    tagged = iter(predictor.tag(sentences, documents))
    for block, sentence in zip(blocks, is_sentence, strict=True):
        if not sentence:
            yield block[0]
            continue
        yield TaggedSentence(tuple(block), tuple(predictor.to_source(next(tagged)[0])))


def is_token_lines(blocks: Sequence[Sequence[str]]) -> bool:
    """Whether ``conll_blocks`` of an input are CoNLL token lines rather than raw text: a ``-DOCSTART-`` line,
    or every non-blank line with the same number of columns and some sentence of two or more lines. So one line
    of text (``echo "Angela Merkel met ..." | predict --format conll``) is text, and so are lines whose word
    counts differ; a file of one-token sentences is tokens (the tokenizer would give the same)."""
    if any(b[0].startswith(DOCSTART) for b in blocks):
        return True
    text = [b for b in blocks if b[0].strip()]
    columns = {len(line.split()) for b in text for line in b}
    return len(columns) == 1 and any(len(b) > 1 for b in text)


def _lines(blocks: Sequence[Sequence[str]]) -> list[str]:
    return [line for b in blocks for line in b]


def _tag_text_as_conll(predictor: SentenceTagger, lines: Sequence[str]) -> Iterator[ConllItem]:
    """Raw text lines as CoNLL: every sentence of a line (``tag_lines``'s tokenizer) as ``token tag`` lines."""
    per_line = [split_sentences(line, max_tokens=MAX_TOKENS) for line in lines]
    flat = [[t.text for t in sentence] for sentences in per_line for sentence in sentences]
    tagged = iter(predictor.tag(flat, [n for n, sentences in enumerate(per_line) for _ in sentences]))
    for sentences in per_line:
        for sentence in sentences:
            tags = predictor.to_source(next(tagged)[0])
            yield TaggedSentence(tuple(t.text for t in sentence), tuple(tags))
        yield ""


def predict_conll(predictor: SentenceTagger, lines: Iterable[str]) -> Iterator[str]:
    """``tag_conll`` as lines: the predicted tag appended to every token line; other lines pass through."""
    for item in tag_conll(predictor, lines):
        yield from (item,) if isinstance(item, str) else item.conll_lines()
