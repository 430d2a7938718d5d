"""The corpus of a run: train, dev and test read once, with tags in the training scheme and as in the files."""

from __future__ import annotations

from dataclasses import dataclass

from ner_app.errors import NerAppError

from .conll import load_hub_splits, load_local_splits
from .schemes import convert, detect_scheme, normalize_scheme, split_tag

SPLITS = ("train", "dev", "test")  # the one name of each split; the dev file is valid.txt
_FILE_SPLITS = {"train": "train", "dev": "valid", "test": "test"}  # split -> name in conll.py's loaders


@dataclass(frozen=True)
class Split:
    """One split: tokens, tags in the training scheme, the original tags and document indices."""

    tokens: list[list[str]]
    tags: list[list[str]]
    source_tags: list[list[str]]
    docs: list[int]

    def __len__(self) -> int:
        return len(self.tokens)


@dataclass(frozen=True)
class Corpus:
    """The three splits; ``source_scheme`` is the scheme of the files (detected on train), ``scheme`` the
    training scheme the ``tags`` of every split are in."""

    splits: dict[str, Split]
    scheme: str
    source_scheme: str


def load_corpus(
    data_dir: str | None, hub_name: str | None, scheme: str, max_sentences: int | None = None
) -> Corpus:
    """Read a folder (``train.txt``, ``valid.txt``, ``test.txt``) or, when ``hub_name`` is set, a Hugging Face
    hub dataset; drop empty rows, keep the first ``max_sentences`` of each split (tiny runs) and convert the
    tags to ``scheme``. Every entity type of dev and test must occur in train."""
    if not data_dir and not hub_name:
        raise NerAppError("set data.dir (a folder with train.txt, valid.txt, test.txt) or data.hub_name")
    normalize_scheme(scheme)  # fail early on an unknown scheme
    scheme = scheme.upper()
    datasets = load_hub_splits(hub_name) if hub_name else load_local_splits(str(data_dir))
    raw = {name: datasets[_FILE_SPLITS[name]].to_dict() for name in SPLITS}
    source_scheme = detect_scheme(raw["train"]["tags"])
    splits = {}
    for name, col in raw.items():
        keep = [i for i, t in enumerate(col["tokens"]) if t]  # an empty row cannot be tagged
        keep = keep[:max_sentences] if max_sentences is not None else keep
        source_tags = [col["tags"][i] for i in keep]
        splits[name] = Split(
            tokens=[col["tokens"][i] for i in keep],
            tags=[convert(t, source_scheme, scheme) for t in source_tags],
            source_tags=source_tags,
            docs=[col["doc"][i] for i in keep],
        )
    types = {split_tag(t)[1] for tags in splits["train"].tags for t in tags if t != "O"}
    for name in ("dev", "test"):
        unseen = {t for tags in splits[name].tags for t in tags if t != "O" and split_tag(t)[1] not in types}
        if unseen:
            raise NerAppError(f"{name} has tags whose entity types never occur in train: {sorted(unseen)}")
    return Corpus(splits, scheme, source_scheme)
