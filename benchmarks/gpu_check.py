"""GPU readiness in one command: ``python benchmarks/gpu_check.py`` (under 8 minutes on one modern GPU).

On a CUDA machine it runs the ``cuda``-marked tests, trains one epoch each of ``conll2003_elmo.yaml`` and
``conll2003_baseline.yaml`` in bf16-mixed with the layer cache on (dev/test F1, training sentences/s), times
the biLM's ``embed`` forward in fp32 and bf16 autocast at batch 64 and 512 (tokens/s), times pretraining
with ``bilm_news.yaml`` (tokens/s), and prints one markdown table. Without CUDA it says so and exits 0.
Needs ../shared (or NER_SHARED) for CoNLL-2003 and the news corpus. Results: docs/gpu.md.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing


def run(args: list[str], timeout: float) -> tuple[int, float, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    start = time.perf_counter()
    done = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    return done.returncode, time.perf_counter() - start, done.stdout + done.stderr


def last_logged(csv_path: Path, column: str) -> float | None:
    rows = [r for r in csv.DictReader(csv_path.open()) if r.get(column)] if csv_path.is_file() else []
    return float(rows[-1][column]) if rows else None


def train_one_epoch(config: str, out: Path) -> list[str]:
    code, seconds, log = run(
        [sys.executable, "train.py", "--config", f"configs/{config}", f"output_dir={out}", "trainer.max_epochs=1",
         "trainer.precision=bf16-mixed", "trainer.accelerator=gpu", f"elmo.cache_dir={out.parent / 'cache'}",
         "trainer.enable_progress_bar=false"], timeout=240,
    )  # fmt: skip
    if code != 0:
        return [f"train {config} (1 epoch, bf16-mixed)", "FAILED", log.strip().splitlines()[-1][:120]]
    metrics = json.loads((out / "metrics.json").read_text())
    speed = last_logged(out / "logs" / "metrics.csv", "train/device/samples_per_sec")
    return [f"train {config} (1 epoch, bf16-mixed, cache on)",
            f"dev F1 {metrics['dev']['f1']:.2f}, test F1 {metrics['test']['f1']:.2f}",
            f"{speed:,.0f} train sentences/s; {seconds:.0f} s in all" if speed else f"{seconds:.0f} s in all"]  # fmt: skip


def embed_speed() -> list[list[str]]:
    from ner_app.bilm import batch_to_ids, load_bilm
    from ner_app.data.conll import read_conll

    shared = Path(os.environ.get("NER_SHARED") or ROOT.parent / "shared")
    sentences = [s.tokens for s in read_conll(shared / "data/conll2003/valid.txt")][:2048]
    bilm = load_bilm(ROOT / "data/bilm/options.json", ROOT / "data/bilm/weights.hdf5").cuda().eval()
    tokens = sum(len(s) for s in sentences)
    rows = []
    for batch in (64, 512):
        batches = [batch_to_ids(sentences[i : i + batch]).cuda() for i in range(0, len(sentences), batch)]
        for name, dtype in (("fp32", None), ("bf16", torch.bfloat16)):
            with (
                torch.inference_mode(),
                torch.autocast("cuda", dtype=dtype or torch.float32, enabled=dtype is not None),
            ):
                bilm(batches[0])  # warm-up
                torch.cuda.synchronize()
                start = time.perf_counter()
                for ids in batches:
                    bilm(ids)
                torch.cuda.synchronize()
            rate = tokens / (time.perf_counter() - start)
            rows.append(
                [
                    f"biLM embed, batch {batch}, {name}",
                    f"{rate:,.0f} tokens/s",
                    f"{len(sentences)} dev sentences",
                ]
            )
    return rows


def pretrain_speed(out: Path, steps: int = 200) -> list[str]:
    code, seconds, log = run(
        [sys.executable, "-m", "ner_app", "pretrain-bilm", "--config", "configs/bilm_news.yaml", f"output_dir={out}",
         f"train.max_steps={steps}", f"train.val_every_n_steps={steps}", "train.val_max_sentences=64",
         "data.heldout_max_sentences=64", "train.enable_progress_bar=false", "data.max_train_tokens=2000000"],
        timeout=240,
    )  # fmt: skip
    if code != 0:
        return ["pretrain bilm_news.yaml", "FAILED", log.strip().splitlines()[-1][:120]]
    from ner_app.config import BilmPretrainConfig, load_config

    t = load_config(ROOT / "configs/bilm_news.yaml", schema=BilmPretrainConfig).train
    rate = last_logged(out / "logs" / "version_0" / "metrics.csv", "train_tok_per_s")
    shown = f"{rate:,.0f} tokens/s (logged)" if rate else f"{steps * t.batch_size * t.unroll_steps * 2 / seconds:,.0f} tokens/s (wall, both directions)"  # fmt: skip
    return [f"pretrain bilm_news.yaml ({steps} steps)", shown, f"{seconds:.0f} s with start-up"]


def main() -> int:
    if not torch.cuda.is_available():
        print("gpu_check: no CUDA device on this machine; nothing was measured (run it on an NVIDIA GPU).")
        return 0
    rows = [["check", "result", "detail"]]
    code, seconds, log = run([sys.executable, "-m", "pytest", "-q", "-m", "cuda", "tests/"], timeout=120)
    rows.append(["pytest -m cuda", "passed" if code == 0 else "FAILED", log.strip().splitlines()[-1][:120]])
    with tempfile.TemporaryDirectory() as tmp:
        for config in ("conll2003_elmo.yaml", "conll2003_baseline.yaml"):
            rows.append(train_one_epoch(config, Path(tmp) / config.removesuffix(".yaml")))
        rows.extend(embed_speed())
        rows.append(pretrain_speed(Path(tmp) / "bilm"))
    print(f"\n{torch.cuda.get_device_name()}, torch {torch.__version__}\n")
    for i, row in enumerate(rows):
        print("| " + " | ".join(row) + " |")
        if i == 0:
            print("|---|---|---|")
    return 0 if all("FAILED" not in r[1] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
