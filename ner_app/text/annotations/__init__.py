"""Annotations in the formats of annotation tools, read into one model and converted along one path.

Each format is one module holding its reader, its writer (when the tool takes predictions) and its record
``FORMAT`` (``format.py``): ``columns`` (CoNLL, TSV), ``conllu``, ``doccano``, ``labelstudio``, ``prodigy``,
``brat`` and ``jsonl`` (this program's). ``registry.py`` lists the records; names, choices, dispatch,
detection and the suffixes of split files are derived from it. Each reader yields documents: raw text with
character spans, or tokens with token spans. ``align`` maps character spans onto the tokenizer's tokens,
``resolve`` applies the label map, the type whitelist and the overlap policy and splits documents into
sentences, and every span it moves, cuts or drops is written to an
:class:`~ner_app.text.annotations.model.Audit` line naming ``FILE:LINE``. ``splits`` reads the train, valid
and test files of a data folder (and a gold file) through that path; ``divide`` makes the three from one
export (``ner-app split``).
"""
