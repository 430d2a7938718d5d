"""Cost of document-context ELMo on CoNLL-2003: the largest document as one stream, and the cache fill.

    python -m benchmarks.document_context [--bilm data/bilm] [--original] [--threads 2] [--repeats 3]
                                          [--skip-fill]

Side by side in one run, for the biLM in ``--bilm`` (and with ``--original`` also an original-size biLM,
93.6M parameters, seeded random weights): the largest CoNLL-2003 document read as one stream against its
sentences read one by one in sentence mode (batches of 64, as the cache fill does), wall seconds (median of
``--repeats``, one call at a time) and the process's peak resident memory above what it held before
(``VmHWM``, reset through ``/proc/self/clear_refs``). Then filling a fresh layer cache with all of train, dev
and test in both modes. See docs/document_context.md.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import torch
from torch.utils.benchmark import timer

from benchmarks.common import ROOT, SHARED, cpu_name, interleaved, print_table, random_bilm
from ner_app.bilm import BidirectionalLM, batch_to_ids, load_bilm
from ner_app.bilm.document import MAX_POSITIONS, stream_layers
from ner_app.text.conll import read_conll
from ner_app.train.layer_cache import LayerCache, fill_document_cache

Document = list[list[str]]


def peak_mb() -> float:
    """The process's peak resident memory (VmHWM) in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM"):
            return int(line.split()[1]) / 1024
    return float("nan")


def measure(run: Callable[[], object], repeats: int) -> tuple[float, float]:
    """(median seconds, peak MiB above the resident memory before the first run)."""
    Path("/proc/self/clear_refs").write_text("5")  # reset the peak to the current resident size
    before = peak_mb()
    seconds = interleaved({"run": run}, repeats, warmup=0)["run"].median
    return seconds, peak_mb() - before


def documents(split: str) -> list[Document]:
    docs: dict[int, Document] = {}
    for sentence in read_conll(SHARED / "data" / "conll2003" / f"{split}.txt"):
        docs.setdefault(sentence.doc, []).append(sentence.tokens)
    return list(docs.values())


def largest_document(
    bilm: BidirectionalLM, name: str, doc: Document, repeats: int
) -> Iterator[tuple[str, ...]]:
    def as_stream() -> object:
        return stream_layers(bilm, [doc])

    def as_sentences() -> object:
        return [bilm(batch_to_ids(doc[i : i + 64])) for i in range(0, len(doc), 64)]

    tokens = sum(len(s) for s in doc)
    for mode, run in (("document (one stream)", as_stream), ("sentence (batches of 64)", as_sentences)):
        seconds, peak = measure(run, repeats)
        yield name, mode, f"{tokens:,}", f"{seconds:.2f}", f"{tokens / seconds:,.0f}", f"{peak:,.0f}"


def fill_rows(bilm: BidirectionalLM, name: str, docs: list[Document]) -> Iterator[tuple[str, ...]]:
    tokens = sum(len(s) for doc in docs for s in doc)
    with tempfile.TemporaryDirectory(prefix="doc_ctx_") as tmp:
        for mode in ("document", "sentence"):
            cache = LayerCache.for_bilm(Path(tmp) / mode, bilm)
            start = timer()
            if mode == "document":
                computed = fill_document_cache(cache, docs, bilm)
            else:
                computed = cache.fill([s for doc in docs for s in doc], bilm, batch_size=64)
            seconds = timer() - start
            size = cache.nbytes / 2**20
            yield name, mode, f"{computed:,}", f"{seconds:.1f}", f"{tokens / seconds:,.0f}", f"{size:,.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--bilm", default=str(ROOT / "data" / "bilm"), help="a biLM folder (default data/bilm)"
    )
    parser.add_argument("--original", action="store_true", help="also an original-size biLM (random weights)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-fill", action="store_true", help="only the largest document")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    splits = {name: documents(name) for name in ("train", "valid", "test")}
    docs = [d for split in splits.values() for d in split]
    doc = max(docs, key=lambda d: sum(len(s) for s in d))
    positions = sum(len(s) + 2 for s in doc)
    print(f"{cpu_name()}, {args.threads} threads, torch {torch.__version__}, fp32")
    print(
        f"largest CoNLL-2003 document: {sum(len(s) for s in doc):,} tokens in {len(doc)} sentences, "
        f"{positions:,} stream positions (cap {MAX_POSITIONS:,})\n"
    )
    folder = Path(args.bilm)
    shown = "shipped" if folder == ROOT / "data" / "bilm" else args.bilm
    bilms = [(shown, load_bilm(folder / "options.json", folder / "weights.hdf5").eval())]
    if args.original:
        bilms.append(("original size", random_bilm("original").eval()))
    header = ["biLM", "mode", "tokens", "seconds", "tokens/s", "peak MiB above start"]
    with torch.inference_mode():
        print_table(
            header,
            (row for name, bilm in bilms for row in largest_document(bilm, name, doc, args.repeats)),
            2,
        )
    if args.skip_fill:
        return
    n_tokens = sum(len(s) for d in docs for s in d)
    print(
        f"\nfilling a fresh layer cache with train + dev + test ({len(docs):,} documents, {n_tokens:,} tokens):\n"
    )
    header = ["biLM", "mode", "sentences computed", "seconds", "tokens/s", "cache MiB"]
    print_table(header, fill_rows(bilms[0][1], bilms[0][0], docs), left=2)


if __name__ == "__main__":
    main()
