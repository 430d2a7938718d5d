"""Annotations in the formats of annotation tools, read into one model and converted along one path.

Each reader (``conll_like``: CoNLL, TSV, CoNLL-U; ``jsonl``: doccano, Prodigy, this program's JSONL;
``labelstudio``; ``brat``) yields documents: raw text with character spans, or tokens with token spans.
``align`` maps character spans onto the tokenizer's tokens, ``resolve`` applies the label map, the type
whitelist and the overlap policy and splits documents into sentences, and every span it moves, cuts or drops
is written to an :class:`~ner_app.text.annotations.model.Audit` line naming ``FILE:LINE``.
"""
