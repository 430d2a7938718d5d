"""Cost of document-context ELMo on CoNLL-2003: the largest document as one stream, and the cache fill.

    python benchmarks/document_context.py [--bilm data/bilm] [--original] [--threads 2] [--repeats 3]
                                          [--skip-fill]

Side by side in one run, for the biLM in ``--bilm`` (and with ``--original`` also an original-size biLM,
93.6M parameters, seeded random weights): the largest CoNLL-2003 document read as one stream against its
sentences read one by one in sentence mode (batches of 64, as the cache fill does), wall seconds (median of
``--repeats``) and the process's peak resident memory above what it held before (``VmHWM``, reset through
``/proc/self/clear_refs``). Then filling a fresh layer cache with all of train, dev and test in both modes.
See docs/document_context.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing
from bilm_speed import SIZES, cpu_model, init_weights  # noqa: E402  (this script's folder)

from ner_app.bilm import BidirectionalLM, batch_to_ids, load_bilm  # noqa: E402
from ner_app.bilm.document import MAX_POSITIONS, fill_document_cache, stream_layers  # noqa: E402
from ner_app.bilm.layer_cache import LayerCache  # noqa: E402
from ner_app.data.conll import read_conll  # noqa: E402

SHARED = Path(os.environ.get("NER_SHARED", ROOT.parent / "shared"))


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
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times), peak_mb() - before


def documents(split: str) -> list[list[list[str]]]:
    docs: dict[int, list[list[str]]] = {}
    for sentence in read_conll(SHARED / "data" / "conll2003" / f"{split}.txt"):
        docs.setdefault(sentence.doc, []).append(sentence.tokens)
    return list(docs.values())


def largest_document(bilm: BidirectionalLM, name: str, doc: list[list[str]], repeats: int) -> list[str]:
    def as_stream() -> object:
        return stream_layers(bilm, [doc])

    def as_sentences() -> object:
        return [bilm(batch_to_ids(doc[i : i + 64])) for i in range(0, len(doc), 64)]

    rows = []
    for mode, run in (("document (one stream)", as_stream), ("sentence (batches of 64)", as_sentences)):
        seconds, peak = measure(run, repeats)
        tokens = sum(len(s) for s in doc)
        rows.append(
            f"| {name} | {mode} | {tokens:,} | {seconds:.2f} | {tokens / seconds:,.0f} | {peak:,.0f} |"
        )
    return rows


def fill_rows(bilm: BidirectionalLM, name: str, splits: dict[str, list[list[list[str]]]]) -> list[str]:
    docs = [doc for split in splits.values() for doc in split]
    tokens = sum(len(s) for doc in docs for s in doc)
    rows = []
    with tempfile.TemporaryDirectory(prefix="doc_ctx_") as tmp:
        for mode in ("document", "sentence"):
            cache = LayerCache.for_bilm(Path(tmp) / mode, bilm)
            start = time.perf_counter()
            if mode == "document":
                computed = fill_document_cache(cache, docs, bilm)
            else:
                computed = cache.fill([s for doc in docs for s in doc], bilm, batch_size=64)
            seconds = time.perf_counter() - start
            rows.append(f"| {name} | {mode} | {computed:,} | {seconds:.1f} | {tokens / seconds:,.0f} | "
                        f"{cache.nbytes / 2**20:,.0f} |")  # fmt: skip
    return rows


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
    doc = max((d for split in splits.values() for d in split), key=lambda d: sum(len(s) for s in d))
    positions = sum(len(s) + 2 for s in doc)
    print(f"{cpu_model()}, {args.threads} threads, torch {torch.__version__}, fp32")
    print(f"largest CoNLL-2003 document: {sum(len(s) for s in doc):,} tokens in {len(doc)} sentences, "
          f"{positions:,} stream positions (cap {MAX_POSITIONS:,})\n")  # fmt: skip
    bilms = [("shipped" if Path(args.bilm) == ROOT / "data" / "bilm" else args.bilm,
              load_bilm(Path(args.bilm) / "options.json", Path(args.bilm) / "weights.hdf5"))]  # fmt: skip
    if args.original:
        torch.manual_seed(0)
        original = SIZES["original"].build()
        init_weights(original)
        bilms.append(("original size", original.eval()))
    print("| biLM | mode | tokens | seconds | tokens/s | peak MiB above start |")
    print("|---|---|---:|---:|---:|---:|")
    with torch.inference_mode():
        for name, bilm in bilms:
            for row in largest_document(bilm.eval(), name, doc, args.repeats):
                print(row, flush=True)
    if args.skip_fill:
        return
    n_docs = sum(len(split) for split in splits.values())
    n_tokens = sum(len(s) for split in splits.values() for d in split for s in d)
    print(
        f"\nfilling a fresh layer cache with train + dev + test ({n_docs:,} documents, {n_tokens:,} tokens):\n"
    )
    print("| biLM | mode | sentences computed | seconds | tokens/s | cache MiB |")
    print("|---|---|---:|---:|---:|---:|")
    for row in fill_rows(bilms[0][1].eval(), bilms[0][0], splits):
        print(row, flush=True)


if __name__ == "__main__":
    main()
