"""One biLM forward (a 'small'-like biLM with 1024-cell LSTMs, 64 sentences of 20-30 tokens, 1 thread), the
median of 8 after 2 warm-ups, from the checkout given as the first argument: the code before and after the
redesign, alternated by run.sh. Both give bit-identical layers (same seed, same weights)."""

import random
import statistics
import sys
import time

ROOT = sys.argv[1]
sys.path.insert(0, ROOT)

import torch  # noqa: E402

from ner_app.bilm import BilmOptions, batch_to_ids  # noqa: E402

torch.set_num_threads(1)
OPTIONS = BilmOptions(
    char_dim=16, filters=((1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512), (7, 1024)), n_highway=1,
    activation="relu", lstm_dim=1024, projection_dim=128, n_layers=2, cell_clip=3.0, proj_clip=3.0,
    use_skip_connections=True,
)  # fmt: skip
torch.manual_seed(0)
bilm = OPTIONS.build().eval()
rng = random.Random(0)
words = [f"w{i}x" * rng.randint(1, 3) for i in range(2000)]
ids = batch_to_ids([[rng.choice(words) for _ in range(rng.randint(20, 30))] for _ in range(64)])
with torch.inference_mode():
    for _ in range(2):
        bilm(ids)
    times = []
    for _ in range(8):
        start = time.perf_counter()
        bilm(ids)
        times.append(time.perf_counter() - start)
print(ROOT, f"{statistics.median(times) * 1000:.1f} ms")
