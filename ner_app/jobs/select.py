"""``select``'s work once its options are checked: read the pool, rank it (``decisions/selection.py``), and
write the chosen sentences as plain lines or with the model's predictions in a predict format (``report/``)."""

from __future__ import annotations

import sys
from dataclasses import dataclass

from ner_app.errors import NerAppError
from ner_app.files import STDOUT, Claim, write_text
from ner_app.report.formats import OutputFormat, Target, write_output


@dataclass(frozen=True)
class SelectJob:
    """What ``select`` was asked, checked: the pool, how much to choose and how, and where the choice goes."""

    input: str
    pool_format: str
    output: str
    format: OutputFormat | None  # None: one selected sentence per line, no predictions
    k: int | None
    tokens: int | None
    seed: int
    strategy: str
    order: str  # "rank" or "pool"
    model: str | None  # None: the shipped tagger
    device: str
    batch_size: int
    max_tokens: int | None
    claim: Claim  # how --output may be written (the output policy of files.py)
    threads: int | None = None  # torch's, or an ONNX folder's onnxruntime threads


def run_select(job: SelectJob) -> None:
    """Choose and write; one summary line on stderr (and a note when ``k`` exceeds the pool)."""
    from ner_app.decisions.selection import read_pool, tokens_of
    from ner_app.decisions.selection import select as choose
    from ner_app.jobs.setup import model_path
    from ner_app.predict.loading import load_predictor
    from ner_app.predict.tag_conll import tag_conll
    from ner_app.report.predictions_html import entity_types

    fmt, k = job.format, job.k
    candidates, kind = read_pool(job.input, job.pool_format)
    if fmt is not None and fmt.reads == "conll" and kind != "conll":
        raise NerAppError(
            f"--format {fmt.name} writes CoNLL token lines: it needs a CoNLL pool, and {job.input} was read as "
            "text (--pool-format conll if it is CoNLL)"
        )
    needs_model = job.strategy != "random" or fmt is not None
    predictor = (
        load_predictor(model_path(job.model), job.device, job.batch_size, job.max_tokens, job.threads)
        if needs_model
        else None
    )
    chosen = choose(predictor, candidates, k, job.strategy, job.seed, job.tokens)
    if job.order == "pool":
        chosen.sort(key=lambda s: s.candidate.index)
    if fmt is None:
        write_text(job.output, "".join(s.candidate.text + "\n" for s in chosen), job.claim)
    else:
        assert predictor is not None
        from ner_app.tagger.version import model_version

        target = Target(
            tuple(entity_types(predictor.tags.itos)), job.input, model_version(model_path(job.model))
        )
        if fmt.reads == "conll":
            lines = [row for s in chosen for row in (*s.candidate.rows, "")]
            write_output(job.output, fmt, tag_conll(predictor, lines, tokens=True), target, job.claim)
        else:
            # a tool's task is a document (a block of lines): a blank line after each makes each candidate one
            texts = [
                t for s in chosen for t in ((s.candidate.text, "") if fmt.documents else (s.candidate.text,))
            ]
            write_output(job.output, fmt, predictor.tag_lines(texts), target, job.claim)
    unit = "sentences" if kind == "conll" else "lines"
    if k is not None and k > len(candidates):
        print(
            f"--k {k} is more than the pool's {len(candidates):,} {unit}: all of them are selected",
            file=sys.stderr,
        )
    where = "standard output" if job.output == STDOUT else job.output
    values = sorted(s.value for s in chosen)
    spread = f"; {job.strategy} from {values[0]:.4g} to {values[-1]:.4g}" if job.strategy != "random" else ""
    print(
        f"selected {len(chosen):,} of {len(candidates):,} {unit}, "
        f"{sum(tokens_of(s.candidate) for s in chosen):,} tokens ({job.strategy}, seed {job.seed}{spread}), "
        f"{job.order} order; wrote {where}",
        file=sys.stderr,
    )
