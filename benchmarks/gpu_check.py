"""GPU readiness in one command: ``python -m benchmarks.gpu_check`` (under 8 minutes on one modern GPU).

On a CUDA machine it runs the ``cuda``-marked tests, trains one epoch each of ``conll2003_elmo.yaml`` and
``conll2003_baseline.yaml`` in bf16-mixed with the layer cache on (dev/test F1, training sentences/s), times
the biLM's ``embed`` forward in fp32 and bf16 autocast at batch 64 and 512 (tokens/s), times pretraining
with ``bilm_news.yaml`` (tokens/s), and prints one markdown table. Without CUDA it says so and exits 0.
Needs ../shared (or NER_SHARED) for CoNLL-2003 and the news corpus. Results: docs/scaling_out.md.

Rates come from the runs' own records: ``metrics.json`` and the CSV log ``logs/metrics.csv`` in the run
folder (Lightning's throughput monitor: ``train/device/samples_per_sec`` for the tagger, sentences;
``train/device/items_per_sec`` for pretraining, stream tokens of one direction).
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import tempfile
from functools import partial
from pathlib import Path

import torch
from torch.utils.benchmark import timer

from benchmarks.common import ROOT, SHARED, gpu_name, interleaved, print_table


def run(args: list[str], timeout: float) -> tuple[int, float, str]:
    """(exit code, wall seconds, output) of a command run in the repository root."""
    start = timer()
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    return done.returncode, timer() - start, done.stdout + done.stderr


def last_logged(run_dir: Path, column: str) -> float | None:
    """The last value of ``column`` in the run's CSV log (``logs/metrics.csv``), or None."""
    path = run_dir / "logs" / "metrics.csv"
    if not path.is_file():
        return None
    with path.open(newline="") as f:
        rows = [r for r in csv.DictReader(f) if r.get(column)]
    return float(rows[-1][column]) if rows else None


def failed(what: str, log: str) -> list[str]:
    return [what, "FAILED", (log.strip().splitlines() or [""])[-1][:120]]


def train_one_epoch(config: str, out: Path, overrides: list[str]) -> list[str]:
    code, seconds, log = run(
        [
            sys.executable,
            "-m",
            "ner_app",
            "train",
            "--config",
            f"configs/{config}",
            f"output_dir={out}",
            "trainer.max_epochs=1",
            "trainer.precision=bf16-mixed",
            "trainer.accelerator=gpu",
            f"elmo.cache_dir={out.parent / 'cache'}",
            "trainer.enable_progress_bar=false",
            *overrides,
        ],
        timeout=240,
    )
    if code != 0:
        return failed(f"train {config} (1 epoch, bf16-mixed)", log)
    metrics = json.loads((out / "metrics.json").read_text())
    speed = last_logged(out, "train/device/samples_per_sec")
    return [
        f"train {config} (1 epoch, bf16-mixed, cache on)",
        f"dev F1 {metrics['dev']['f1']:.2f}, test F1 {metrics['test']['f1']:.2f}",
        f"{speed:,.0f} train sentences/s; {seconds:.0f} s in all" if speed else f"{seconds:.0f} s in all",
    ]


def embed_speed() -> list[list[str]]:
    from ner_app.bilm import batch_to_ids, load_bilm
    from ner_app.text.conll import read_conll

    sentences = [s.tokens for s in read_conll(SHARED / "data/conll2003/valid.txt")][:2048]
    bilm = load_bilm(ROOT / "data/bilm/options.json", ROOT / "data/bilm/weights.hdf5").cuda().eval()
    tokens = sum(len(s) for s in sentences)

    @torch.inference_mode()
    def embed_all(batches: list[torch.Tensor], dtype: torch.dtype | None) -> None:
        with torch.autocast("cuda", dtype=dtype or torch.float32, enabled=dtype is not None):
            for ids in batches:
                bilm(ids)

    rows = []
    for batch in (64, 512):
        torch.cuda.reset_peak_memory_stats()
        batches = [batch_to_ids(sentences[i : i + batch]).cuda() for i in range(0, len(sentences), batch)]
        passes = {
            "fp32": partial(embed_all, batches, None),
            "bf16": partial(embed_all, batches, torch.bfloat16),
        }
        for name, m in interleaved(passes, repeats=3).items():
            rows.append(
                [
                    f"biLM embed, batch {batch}, {name}",
                    f"{tokens / m.median:,.0f} tokens/s",
                    f"{len(sentences)} dev sentences, median of 3 passes",
                ]
            )
        rows[-1][2] += f"; peak CUDA memory {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB (both passes)"
    return rows


def short_pretraining(out: Path, steps: int, *overrides: str) -> tuple[int, float, str]:
    """``steps`` steps of ``bilm_news.yaml`` on 2M tokens with a small validation: (exit code, seconds, log)."""
    return run(
        [
            sys.executable,
            "-m",
            "ner_app",
            "pretrain-bilm",
            "--config",
            "configs/bilm_news.yaml",
            f"output_dir={out}",
            f"train.max_steps={steps}",
            f"train.val_every_n_steps={steps}",
            "train.val_max_sentences=64",
            "data.heldout_max_sentences=64",
            "train.enable_progress_bar=false",
            "data.max_train_tokens=2000000",
            *overrides,
        ],
        timeout=240,
    )


def pretrain_speed(out: Path, steps: int = 200) -> list[str]:
    code, seconds, log = short_pretraining(out, steps)
    if code != 0:
        return failed("pretrain bilm_news.yaml", log)
    from ner_app.pretrain.metrics import PretrainMetrics

    metrics = PretrainMetrics.read(out / "metrics.json")
    whole_run, logged = metrics.train_tokens_per_s, last_logged(out, "train/device/items_per_sec")
    if whole_run:
        shown = f"{whole_run:,.0f} tokens/s (metrics.json, one direction)"
    elif logged:
        shown = f"{logged:,.0f} tokens/s (logged, one direction)"
    else:
        from ner_app.config.load import BilmPretrainConfig, load_config

        t = load_config(ROOT / "configs/bilm_news.yaml", schema=BilmPretrainConfig).train
        shown = f"{steps * t.batch_size * t.unroll_steps * 2 / seconds:,.0f} tokens/s (wall, both directions)"
    return [f"pretrain bilm_news.yaml ({steps} steps)", shown, f"{seconds:.0f} s with start-up"]


def main(overrides: list[str]) -> int:
    """``overrides`` (``key=value``) are added to both training runs, e.g. ``model.glove=PATH`` where the GloVe
    package cannot be installed."""
    if not torch.cuda.is_available():
        print("gpu_check: no CUDA device on this machine; nothing was measured (run it on an NVIDIA GPU).")
        return 0
    rows = []
    code, seconds, log = run([sys.executable, "-m", "pytest", "-q", "-m", "cuda", "tests/"], timeout=120)
    rows.append(
        ["pytest -m cuda", "passed", log.strip().splitlines()[-1][:120]]
        if code == 0
        else failed("pytest -m cuda", log)
    )
    with tempfile.TemporaryDirectory() as tmp:
        for config in ("conll2003_elmo.yaml", "conll2003_baseline.yaml"):
            rows.append(train_one_epoch(config, Path(tmp) / config.removesuffix(".yaml"), overrides))
            print(rows[-1], flush=True)
        rows.extend(embed_speed())
        rows.append(pretrain_speed(Path(tmp) / "bilm"))
    print(f"\n{gpu_name()}, torch {torch.__version__}\n")
    print_table(["check", "result", "detail"], rows, left=3)
    return 0 if all(r[1] != "FAILED" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
