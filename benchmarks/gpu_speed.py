"""Where the GPU's time goes: ``python -m benchmarks.gpu_speed [model.glove=PATH]`` (about 5 minutes on one GPU).

The GPU goals (docs/performance.md) are 10,000 training sentences/s for the baseline tagger in bf16-mixed and
150,000 tokens/s for pretraining. This probe measures, in one run, how far each is and why:

1. the baseline tagger trained one epoch in bf16-mixed at ``data.batch_size`` 64 (the recipe), 256 and 1024
   (``max_tokens_per_batch`` scaled with it): training sentences/s from the run's own log;
2. the tagger's bare training step (loss, backward, clipping, Adam) on batches already on the GPU, outside
   Lightning and the data loader, at the same batch sizes: sentences/s, peak CUDA memory, and the profiler's
   top operators by host time, with the count of host-device synchronisations;
3. pretraining ``bilm_news.yaml`` for 100 steps at ``train.batch_size`` 64 (the recipe) and 512: tokens/s.

Needs CUDA and ../shared (or NER_SHARED). Prints markdown tables; results go into docs/scaling_out.md.
"""

from __future__ import annotations

import sys
import tempfile
import time
from itertools import islice
from pathlib import Path

import torch

from benchmarks.common import ROOT, SHARED, gpu_name, print_table
from benchmarks.gpu_check import last_logged, run, short_pretraining

BATCHES = (64, 256, 1024)


def train_rate(out: Path, batch: int, overrides: list[str]) -> list[str]:
    code, seconds, log = run(
        [
            sys.executable,
            "-m",
            "ner_app",
            "train",
            "--config",
            "configs/conll2003_baseline.yaml",
            f"output_dir={out}",
            "trainer.max_epochs=1",
            "trainer.precision=bf16-mixed",
            "trainer.accelerator=gpu",
            f"data.batch_size={batch}",
            f"data.max_tokens_per_batch={batch * 128}",
            "trainer.enable_progress_bar=false",
            *overrides,
        ],
        timeout=240,
    )
    if code != 0:
        return [f"train, batch {batch}", "FAILED", (log.strip().splitlines() or [""])[-1][:120]]
    speed = last_logged(out, "train/device/samples_per_sec")
    # The monitor logs a rate over its last 20 batches: an epoch of fewer batches logs none.
    shown = f"{speed:,.0f} sentences/s" if speed else "not logged (fewer batches than the monitor's window)"
    return [f"train 1 epoch, batch {batch}", shown, f"{seconds:.0f} s in all"]


def train_step(tagger: torch.nn.Module, optimizer: torch.optim.Optimizer, batch: dict) -> None:
    """One bf16-autocast step as Lightning runs it: loss, backward, norm clipping at 5, Adam."""
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = tagger.loss(batch)  # type: ignore[operator]
    loss.backward()
    torch.nn.utils.clip_grad_norm_(tagger.parameters(), 5.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def bare_steps(overrides: list[str]) -> tuple[list[list[str]], str]:
    """Sentences/s of the bare training step at each batch size, and the profiler's table at batch 64."""
    from torch.profiler import ProfilerActivity, profile

    from ner_app.config.load import load_config
    from ner_app.tagger.glove import load_glove
    from ner_app.train.corpus import load_corpus
    from ner_app.train.datamodule import ConllDataModule
    from ner_app.train.run import build_spec, build_tagger

    cfg = load_config(ROOT / "configs/conll2003_baseline.yaml", overrides)
    corpus = load_corpus(cfg.data.dir, None, cfg.data.scheme, None)
    glove = load_glove(cfg.model.glove, cfg.model.word_dim) if cfg.model.glove else None
    spec = build_spec(cfg, corpus, None, glove[0] if glove else None)
    rows, table = [], ""
    for batch in BATCHES:
        torch.manual_seed(0)
        tagger = build_tagger(cfg, spec, None, corpus, glove).cuda().train()
        optimizer = torch.optim.Adam(
            [p for p in tagger.parameters() if p.requires_grad], lr=1e-3, foreach=True
        )
        dm = ConllDataModule(
            corpus,
            spec,
            batch_size=batch,
            eval_batch_size=256,
            num_workers=0,
            seed=0,
            max_tokens=batch * 128,
            eval_max_tokens=None,
        )
        staged = []
        for b in islice(dm.dataloader("train", shuffle=True), 40):
            staged.append({k: v.cuda() if isinstance(v, torch.Tensor) else v for k, v in b.items()})

        for b in staged[:5]:  # warm-up: cuDNN plans, allocator
            train_step(tagger, optimizer, b)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        start, sentences = time.perf_counter(), 0
        for b in staged[5:]:
            train_step(tagger, optimizer, b)
            sentences += len(b["tokens"])
        torch.cuda.synchronize()
        rate = sentences / (time.perf_counter() - start)
        peak = torch.cuda.max_memory_allocated() / 2**30
        rows.append(
            [f"bare step, batch {batch}", f"{rate:,.0f} sentences/s", f"peak CUDA memory {peak:.2f} GiB"]
        )
        if batch == BATCHES[0]:
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                for b in staged[5:15]:
                    train_step(tagger, optimizer, b)
                torch.cuda.synchronize()
            table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=18)
    return rows, table


def pretrain_rate(out: Path, batch: int, steps: int = 100) -> list[str]:
    code, seconds, log = short_pretraining(out, steps, f"train.batch_size={batch}", "train.accelerator=gpu")
    if code != 0:
        return [f"pretrain, batch {batch}", "FAILED", (log.strip().splitlines() or [""])[-1][:120]]
    logged = last_logged(out, "train/device/items_per_sec")
    return [
        f"pretrain 100 steps, batch {batch}",
        f"{logged:,.0f} tokens/s (one direction)" if logged else "?",
        f"{seconds:.0f} s in all",
    ]


def main(overrides: list[str]) -> int:
    if not torch.cuda.is_available():
        print("gpu_speed: no CUDA device on this machine; nothing was measured.")
        return 0
    if not (SHARED / "data/conll2003/train.txt").is_file():
        print(f"gpu_speed: no CoNLL-2003 under {SHARED}; nothing was measured.")
        return 0
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for batch in BATCHES:
            rows.append(train_rate(Path(tmp) / f"t{batch}", batch, overrides))
            print(rows[-1], flush=True)
        bare, table = bare_steps(overrides)
        rows += bare
        print(*bare, sep="\n", flush=True)
        for batch in (64, 512):
            rows.append(pretrain_rate(Path(tmp) / f"p{batch}", batch))
            print(rows[-1], flush=True)
    print(f"\n{gpu_name()}, torch {torch.__version__}\n")
    print_table(["check", "result", "detail"], rows, left=3)
    print("\nProfiler, 10 bare training steps at batch 64 (bf16 autocast), by self CPU time:\n")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
