"""``id_runs``: documents as runs of ids, against a brute-force oracle (``itertools.groupby``)."""

from __future__ import annotations

import itertools
import random

from ner_app.text.runs import id_runs


def oracle(ids: list[int | None]) -> list[range]:
    runs, start = [], 0
    for key, group in itertools.groupby(ids):
        n = len(list(group))
        if key is not None:
            runs.append(range(start, start + n))
        start += n
    return runs


def test_runs_match_the_oracle_on_random_ids() -> None:
    rng = random.Random(0)
    for _ in range(2000):
        ids = [rng.choice([None, 0, 1, 2]) for _ in range(rng.randrange(0, 12))]
        assert id_runs(ids) == oracle(ids), ids


def test_documents_of_sentences_and_of_lines() -> None:
    assert id_runs([0, 0, 1, None, 1]) == [range(0, 2), range(2, 3), range(4, 5)]
    assert id_runs([]) == [] and id_runs([None, None]) == []
    assert id_runs(["a", "a", "a"]) == [range(0, 3)]  # a file without -DOCSTART- is one document
