"""The docs stay true: every documented command runs in a test at tiny scale or is marked a long job.

A command is a logical line of a ```bash or ```sh block of README.md or docs/*.md (``\\`` continuations
joined; blank and comment-only lines skipped). It passes when its trailing comment starts with ``long job``
(``cmd  # long job: why``), or when TESTED maps it (whitespace normalised) to the test that runs it at tiny
scale. Also: every TESTED test exists and every TESTED command is still documented, every relative link
resolves, the README's set-up commands are the ones CI runs, docs/configuration.md names every config key
with its default, the Python examples run, and the benchmarks' smoke commands run.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ner_app.cli.commands import main
from ner_app.config.load import BilmPretrainConfig, TrainConfig
from ner_app.pretrain.metrics import PretrainMetrics
from tests.helpers import SHARED, shared_path
from tests.system.docs_parsing import anchors, code_blocks, commands_in, documented, pages, prose

ROOT = Path(__file__).resolve().parents[2]
THIS = "tests/system/test_docs_commands.py"

# The benchmarks' smoke commands (seconds each), run below; the files they need from ../shared.
SMOKE = {
    "crf_speed": ("python -m benchmarks.crf_speed --threads 1 --repeats 1", None),
    "bilm_speed": ("python -m benchmarks.bilm_speed --size tiny --threads 1 --repeats 1 --batch 8", None),
    "cache_speed": (
        "python -m benchmarks.cache_speed --bilm tiny --threads 1 --max-sentences 20 --no-cache-batches 1 "
        "--predict-sentences 5 --trim-repeats 1 --trim-sentences 20",
        ("data", "conll2003", "train.txt"),
    ),
    "embed_process": ("python -m benchmarks.embed_process --size tiny --sentences 16 --repeats 1", None),
    "document_context": (
        "python -m benchmarks.document_context --skip-fill --repeats 1 --threads 1",
        ("data", "conll2003", "train.txt"),
    ),
    "memory": (
        "python -m benchmarks.memory --lengths 50 --tasks embed --eval-sentences 20 --train-sentences 20 "
        "--out runs/memory_smoke",
        ("data", "conll2003", "valid.txt"),
    ),
    "partial_annotation": ("python -m benchmarks.partial_annotation --smoke --out runs/partial_smoke", None),
    "active_learning": (
        "python -m benchmarks.active_learning --smoke --out runs/active_learning_smoke",
        None,
    ),
    "inference_steps": ("python -m benchmarks.inference_steps --size tiny --repeats 1 --batch 8", None),
    "batch_size": ("python -m benchmarks.batch_size --lines 20 --repeats 1 --sizes 8,16", None),
    "char_rows": (
        "python -m benchmarks.char_rows --repeats 1 --batches 2 --sizes 1,8 --train tests/data/tiny_conll/train.txt",
        None,
    ),
    "lstm_directions": (
        "python -m benchmarks.lstm_directions --threads 1 --repeats 1 --batch 8 --steps 5",
        None,
    ),
    "calibration": (
        "python -m benchmarks.calibration --model data/models/conll2003 --files tests/data/tiny_conll/valid.txt",
        None,
    ),
    "calibration_features": (
        "python -m benchmarks.calibration_features --dev tests/data/tiny_conll/valid.txt "
        "--test tests/data/tiny_conll/test.txt --train tests/data/tiny_conll/train.txt --folds 2",
        None,
    ),
    "early_errors": ("python -m benchmarks.early_errors --repeats 1", None),
    "cli_help": ("python -m benchmarks.cli_help --repeats 1", None),
    "step_overhead": (
        "python -m benchmarks.step_overhead --before . --rounds 1 --steps 5 --warmup 2",
        None,
    ),
    "epoch_speed": (
        "python -m benchmarks.epoch_speed --before . --rounds 1 --train-batches 3 --max-sentences 100 --threads 1",
        ("data", "conll2003", "train.txt"),
    ),
    "encoder_speed": (
        "python -m benchmarks.encoder_speed --models data/models/conll2003 data/models/conll2003 --sentences 20 "
        "--rounds 1",
        None,
    ),
    "predict_folder": ("python -m benchmarks.predict_folder --files 20 --rounds 1", None),
    "pretrain_speed": (
        "python -m benchmarks.pretrain_speed --threads 1 --repeats 1 --warmup 0 --tokens 20000 --variants today "
        "--no-flops",
        ("corpus", "news_pretrain.tok.txt"),
    ),
}

TINY_PRETRAIN = [
    "python -m ner_app pretrain-bilm --config configs/bilm_tiny.yaml",
    "python -m ner_app pretrain-bilm --config configs/bilm_tiny.yaml --resume train.max_steps=40",
]

# documented command (whitespace normalised) -> the test that runs it at tiny scale
TESTED: dict[str, str] = {
    "python -m ner_app split export.json --output mine": "tests/text/test_split.py::test_documented_commands",
    "python -m ner_app split export.json --output mine --dev 0.15 --test 0.15 --seed 2": (
        "tests/text/test_split.py::test_documented_commands"
    ),
    "python -m ner_app check-data mine/": "tests/train/test_own_data.py::test_documented_commands",
    "python -m ner_app check-data --config configs/own_data.yaml": (
        "tests/train/test_own_data.py::test_documented_commands"
    ),
    "python -m ner_app train --config configs/own_data.yaml data.dir=mine": (
        "tests/train/test_own_data.py::test_documented_commands"
    ),
    "python -m ner_app predict --model runs/own_data/export --input news.txt --format labelstudio "
    "--output pre.json": "tests/train/test_own_data.py::test_documented_commands",
    "python -m ner_app train --config configs/own_data_continue.yaml --init-from data/models/conll2003 "
    "data.dir=mine data.previous_dev=mine/test.txt": "tests/train/test_own_data.py::test_documented_loop",
    "python -m ner_app predict --model runs/own_data_continue/export --input news.txt --format labelstudio "
    "--output pre.json": "tests/train/test_own_data.py::test_documented_loop",
    "python -m ner_app convert export.jsonl --from doccano --outside unknown --output mine/train.txt": (
        "tests/train/test_own_data.py::test_documented_convert_outside_unknown"
    ),
    "python -m ner_app predict --model runs/tiny/export --input news.txt --format brat --output pre_brat": (
        "tests/system/hostile/test_check_data.py::test_predict_never_replaces_what_it_did_not_write"
    ),
    "python -m ner_app predict --model runs/tiny/export --input news.txt --workers 2 > entities.jsonl": (
        "tests/system/hostile/test_predict_workers.py::test_workers_write_what_one_process_writes"
    ),
    **{
        command: "tests/system/hostile/test_predict.py::test_documented_folder_commands"
        for command in (
            "python -m ner_app predict --model runs/tiny/export --input texts --output tagged",
            "python -m ner_app predict --model runs/tiny/export --input 'texts/**/*.txt' --output tagged.jsonl",
            "python -m ner_app predict --model runs/tiny/export --input texts --output tagged --shard 1/2",
            "python -m ner_app predict --model runs/tiny/export --input texts --output tagged --shard 2/2",
        )
    },
    "python -m ner_app export --onnx --quantize int8 --model runs/tiny/export --output runs/tiny/onnx_int8": (
        "tests/serve/test_onnx_int8.py::test_int8_graphs_hold_integer_ops_and_the_manifest_says_so"
    ),
    "python -m ner_app benchmark speed --model runs/tiny/export --input news.txt --path torch": (
        "tests/serve/test_onnx_int8.py::test_benchmark_speed_on_every_path"
    ),
    "python -m ner_app convert export.jsonl --from doccano --output mine/train.txt": (
        "tests/text/test_annotation_formats.py::test_documented_commands"
    ),
    "python -m ner_app convert ann/ --from brat --output mine/valid.txt --labels Organization=ORG,Person=PER "
    "--types ORG,PER --strict": "tests/text/test_annotation_formats.py::test_documented_commands",
    'pip install torch==2.13.0 -e ".[dev]"': f"{THIS}::test_setup_commands_are_what_ci_runs",
    "python -m pytest": f"{THIS}::test_setup_commands_are_what_ci_runs",
    "python train.py --config configs/tiny.yaml": (
        "tests/train/test_train.py::test_tiny_config_trains_to_f1_one_and_writes_reports"
    ),
    "python train.py --config configs/tiny.yaml trainer.max_epoch=3": (
        "tests/train/test_train.py::test_bad_config_is_one_clear_error"
    ),
    "python train.py --config configs/tiny.yaml trainer.max_epochs=3 trainer.patience=100 model.dropout=0.3 "
    "output_dir=runs/tiny3": "tests/train/test_train.py::test_resume_finishes_like_an_uninterrupted_run",
    "python train.py --config configs/tiny.yaml trainer.max_epochs=6 trainer.patience=100 model.dropout=0.3 "
    "output_dir=runs/tiny3 --resume": "tests/train/test_train.py::test_resume_finishes_like_an_uninterrupted_run",
    'echo "Alice Smith flew to Paris." | python -m ner_app predict --model runs/tiny/export --input -': (
        "tests/serve/test_export_predict.py::test_predict_text_offsets_are_exact"
    ),
    "python -m ner_app predict --model runs/tiny/export --input news.txt > entities.jsonl": (
        "tests/serve/test_export_predict.py::test_predict_command_reads_files"
    ),
    "python -m ner_app predict --model runs/tiny/export --input tests/data/tiny_conll/test.txt --format conll": (
        "tests/serve/test_export_predict.py::test_predict_command_reads_files"
    ),
    "python -m ner_app export --checkpoint runs/tiny/checkpoints/best.ckpt --output runs/tiny/export_best": (
        "tests/serve/test_export_predict.py::test_export_command_from_checkpoint_equals_end_of_training_export"
    ),
    "python -m ner_app embed --options data/bilm/options.json --weights data/bilm/weights.hdf5 "
    "--input sentences.txt --output layers.hdf5": "tests/serve/test_embed_cli.py::test_embed_writes_every_layer_per_line",
    "python -m ner_app embed --options ../shared/reference/allennlp_elmo/options.json "
    "--weights ../shared/reference/allennlp_elmo/lm_weights.hdf5 --input sentences.txt --output layers.hdf5 "
    "--batch-size 3 --stateful": "tests/bilm/test_bilm_parity.py::test_embed_command_stateful_matches_reference",
    "python -m ner_app --help": "tests/serve/test_embed_cli.py::test_help_lists_commands",
    'echo "Angela Merkel met Emmanuel Macron in Berlin." | ner-app predict --input -': (
        "tests/serve/test_shipped.py::test_predict_from_stdin_with_the_shipped_model"
    ),
    "ner-app serve --port 8000": "tests/serve/test_server.py::test_answers_are_what_predict_prints",
    'curl -s 127.0.0.1:8000/predict -d \'{"texts": ["Angela Merkel met Emmanuel Macron in Berlin.", '
    '"Acme Corp hired Bob Jones."]}\'': "tests/serve/test_server.py::test_the_documented_curl_commands",
    "python -m ner_app predict --model runs/tiny/onnx --input news.txt > entities.jsonl": (
        "tests/serve/test_onnx_everywhere.py::test_predict_writes_the_exports_bytes"
    ),
    "python -m ner_app evaluate --model runs/tiny/onnx --gold tests/data/tiny_conll/test.txt": (
        "tests/serve/test_onnx_everywhere.py::test_evaluate_reports_are_the_exports"
    ),
    "python -m ner_app serve --model runs/tiny/onnx --port 8000": (
        "tests/serve/test_onnx_everywhere.py::test_predict_evaluate_and_serve_run_where_torch_cannot_be_imported"
    ),
    "python -m ner_app calibrate --model runs/tiny/onnx --gold valid.txt --output runs/tiny/onnx_calibrated": (
        "tests/serve/test_onnx_everywhere.py::test_calibrating_an_onnx_folder_writes_a_calibrated_onnx_folder"
    ),
    "python -m ner_app evaluate --model runs/tiny/onnx_int8 --gold tests/data/tiny_conll/test.txt": (
        "tests/serve/test_onnx_everywhere.py::test_evaluate_reports_on_an_int8_folder"
    ),
    "python -m ner_app export --onnx --model runs/tiny/export --output runs/tiny/onnx": (
        "tests/serve/test_onnx.py::test_export_again_replaces_its_own_folder_only"
    ),
    "python -m ner_app find-threshold --model runs/tiny/export --gold tests/data/tiny_conll/valid.txt": (
        "tests/serve/test_active_learning.py::test_find_threshold_target_precision_is_the_lowest_reaching_it"
    ),
    "python -m ner_app find-threshold --model runs/tiny/export --gold tests/data/tiny_conll/valid.txt "
    "--precision 0.95": "tests/serve/test_active_learning.py::test_find_threshold_target_precision_is_the_lowest_reaching_it",
    "python -m ner_app select --model runs/tiny/export --input pool.txt --k 100 --strategy margin --output next.txt": (
        "tests/serve/test_active_learning.py::test_k_larger_than_the_pool_selects_all_and_says_so"
    ),
    "python -m ner_app select --model runs/tiny/export --input pool.txt --k 100 --format jsonl --output next.jsonl": (
        "tests/serve/test_active_learning.py::test_select_writes_predictions_as_predict_does"
    ),
    "python -m ner_app select --model runs/tiny/export --input pool.txt --tokens 2000 --strategy mnlp "
    "--output next.txt": (
        "tests/serve/test_active_learning.py::test_a_token_budget_selects_the_longest_prefix_of_the_ranking_that_fits"
    ),
    "python -m ner_app evaluate --model runs/tiny/export --gold tests/data/tiny_conll/test.txt": (
        "tests/serve/test_evaluate.py::test_evaluate_prints_a_table_with_every_type"
    ),
    "python -m ner_app evaluate --model runs/tiny/export --gold tests/data/tiny_conll/test.txt --json "
    "--predictions runs/tiny/test_again.conll": (
        "tests/serve/test_evaluate.py::test_evaluate_json_is_conlleval_and_the_runs_metrics"
    ),
    "ner-app evaluate --gold ../shared/data/conll2003/test.txt": (
        "tests/serve/test_shipped.py::test_evaluate_reproduces_the_test_f1_in_the_models_readme"
    ),
    "ner-app evaluate --gold ../shared/data/conll2003/test.txt --case-views": (
        "tests/serve/test_shipped.py::test_case_views_of_the_shipped_tagger_are_the_documented_ones"
    ),
    "python -m ner_app embed --input sentences.txt --output layers.hdf5": (
        "tests/serve/test_shipped.py::test_embed_defaults_to_the_shipped_bilm_and_tokenizes"
    ),
    "python -m ner_app embed --input news.txt --tokenize --output layers.hdf5": (
        "tests/serve/test_shipped.py::test_embed_defaults_to_the_shipped_bilm_and_tokenizes"
    ),
    "python -m ner_app embed --options data/bilm/options.json --weights data/bilm/weights.hdf5 "
    "--input docs.txt --output layers.hdf5 --context document": (
        "tests/train/test_document_pipeline.py::test_embed_document_context"
    ),
    "python -m ner_app predict --model runs/conll2003_elmo_doc/export --input news.txt": (
        "tests/train/test_document_pipeline.py::test_predict_text_line_is_one_document"
    ),
    "python -m benchmarks.gpu_check": "tests/cli/test_cli.py::test_gpu_check_without_cuda_says_so_and_exits_0",
    "python -m benchmarks.gpu_speed model.glove=PATH": (
        "tests/cli/test_cli.py::test_gpu_speed_without_cuda_says_so_and_exits_0"
    ),
    "cd /tmp && python -m ner_app train --config ~/ner_app/configs/tiny.yaml output_dir=runs/moved "
    "trainer.max_epochs=1 trainer.threads=1": "tests/cli/test_paths.py::test_tiny_config_trains_from_another_directory",
    "python -m ner_app train --config configs/tiny.yaml trainer.max_epochs=3 trainer.enable_progress_bar=true "
    "trainer.threads=1 2> train.log": "tests/runtime/test_progress.py::test_training_log_has_a_line_per_tenth_of_an_epoch",
    "python -m ner_app report runs/conll2003_elmo": "tests/report/test_report.py::test_tiny_run_report_is_complete_and_self_contained",
    "python -m ner_app report runs/conll2003_elmo --output /tmp/elmo.html": (
        "tests/report/test_report.py::test_tokens_are_escaped_and_output_goes_where_asked"
    ),
    "python -m ner_app compare runs/elmo_seed1 runs/elmo_seed2 runs/elmo_seed3 runs/base_seed1 runs/base_seed2": (
        "tests/report/test_compare.py::test_table_equals_numbers_by_hand"
    ),
    "python -m ner_app compare runs/*/ --html compare.html": (
        "tests/report/test_compare.py::test_html_page_has_the_tables_and_an_embedded_chart"
    ),
    "for s in 1 2 3; do python -m ner_app train --config configs/tiny.yaml output_dir=runs/tiny_seed$s seed=$s "
    "trainer.max_epochs=6 elmo.cache_dir=null; done": "tests/report/test_compare.py::test_paired_by_seed",
    "for s in 1 2; do python -m ner_app train --config configs/tiny.yaml output_dir=runs/tiny_lr02_seed$s seed=$s "
    "optim.lr=0.02 trainer.max_epochs=6 elmo.cache_dir=null; done": "tests/report/test_compare.py::test_paired_by_seed",
    "python -m ner_app compare runs/tiny_seed* runs/tiny_lr02_seed* --html compare.html": (
        "tests/report/test_compare.py::test_paired_by_seed"
    ),
    "python -m ner_app predict --model runs/elmo/export --input article.txt --format html > article.html": (
        "tests/report/test_predictions_html.py::test_marked_spans_are_the_predicted_entities"
    ),
    "python -m ner_app pretrain-bilm --config configs/bilm_tiny.yaml output_dir=runs/bilm_tiny_ddp "
    "train.accelerator=cpu train.devices=2 train.strategy=ddp": (
        "tests/system/test_pretrain_distributed.py::test_two_processes_pretrain_like_one_and_write_once"
    ),
    "python -m ner_app embed --options data/bilm/options.json --weights data/bilm/weights.hdf5 --input sentences.txt "
    "--output hub.hdf5 --outputs all": "tests/serve/test_hub_outputs.py::test_embed_outputs_all_writes_one_group_per_line",
    "python -m ner_app embed --options data/bilm/options.json --weights data/bilm/weights.hdf5 --input sentences.txt "
    "--output pooled.hdf5 --outputs elmo,default --scalar-mix 0.5,-1,2 --gamma 0.7": (
        "tests/serve/test_hub_outputs.py::test_embed_outputs_all_writes_one_group_per_line"
    ),
    "python -c \"import h5py; f = h5py.File('hub.hdf5'); print(dict(f.attrs)); "
    "print({k: v.shape for k, v in f['0'].items()})\"": (
        "tests/serve/test_hub_outputs.py::test_embed_outputs_all_writes_one_group_per_line"
    ),
    "python -m ner_app train --config configs/tiny.yaml": (
        "tests/train/test_init_from.py::test_continued_tagger_starts_with_the_exports_weights"
    ),
    "python -m ner_app train --config configs/tiny.yaml --init-from runs/tiny/export output_dir=runs/tiny_prod "
    "data.dir=mine_prod data.previous_dev=tests/data/tiny_conll/valid.txt": (
        "tests/train/test_init_from.py::test_init_from_adds_a_type_and_reports_old_types_before_and_after"
    ),
    "python -m ner_app pretrain-bilm --config configs/bilm_tiny.yaml output_dir=runs/bilm_es "
    "data.train=mine_es/train.txt data.heldout=[mine_es/valid.txt] data.max_train_tokens=null": (
        "tests/train/test_other_language.py::test_spanish_without_glove_with_its_own_bilm"
    ),
    "python -m ner_app train --config configs/tiny.yaml output_dir=runs/tiny_es data.dir=mine_es model.glove=none "
    "elmo.options=runs/bilm_es/options.json elmo.weights=runs/bilm_es/weights.hdf5": (
        "tests/train/test_other_language.py::test_spanish_without_glove_with_its_own_bilm"
    ),
    "python -m ner_app evaluate --model runs/tiny_es/export --gold mine_es/test.txt": (
        "tests/train/test_other_language.py::test_spanish_without_glove_with_its_own_bilm"
    ),
    "python -m ner_app.onnx.ray_batch --model runs/tiny/onnx --output predictions --actors 2 news.txt": (
        "tests/serve/test_ray_batch.py::test_the_documented_command"
    ),
    **{command: f"{THIS}::test_tiny_pretraining_commands_run" for command in TINY_PRETRAIN},
    **{command: f"{THIS}::test_benchmark_smoke_command_runs[{name}]" for name, (command, _) in SMOKE.items()},
}


# ------------------------------------------------------------------------------------------- tests
def test_the_parser_on_a_hand_written_page() -> None:
    page = (
        "text `python not_a_command.py`\n"
        "```bash\n"
        "# a comment line\n"
        "\n"
        "python a.py --x 1 \\\n"
        "    --y 'a # not a comment'   # long job: why\n"
        'echo "#hash" | python b.py#notcomment  # tested\n'
        "```\n"
        "```python\n"
        "print('not a shell command')\n"
        "```\n"
        "~~~sh\n"
        "ls\n"
        "~~~\n"
    )
    got = commands_in(page, "x.md")
    assert [(c.line, c.command, c.comment, c.long_job) for c in got] == [
        (5, "python a.py --x 1 --y 'a # not a comment'", "long job: why", True),
        (7, 'echo "#hash" | python b.py#notcomment', "tested", False),
        (13, "ls", "", False),
    ]


def test_every_documented_command_is_tested_or_a_long_job() -> None:
    missing = [
        f"{c.page}:{c.line}: {c.command}" for c in documented() if not c.long_job and c.command not in TESTED
    ]
    assert not missing, "not in TESTED and not marked '# long job':\n" + "\n".join(missing)


def test_no_tested_entry_is_stale() -> None:
    commands = {c.command for c in documented() if not c.long_job}
    stale = [command for command in TESTED if command not in commands]
    assert not stale, "TESTED commands no page documents (or only as long jobs):\n" + "\n".join(stale)


@pytest.mark.system
def test_every_tested_entry_names_a_collected_test() -> None:
    files = sorted({target.split("::")[0] for target in TESTED.values()})
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
            "-o",
            "addopts=",
            *files,
        ],
        cwd=ROOT,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    collected = {line.strip() for line in result.stdout.splitlines() if "::" in line}
    unknown = [
        target
        for target in sorted(set(TESTED.values()))
        if target not in collected and not any(node.startswith(target + "[") for node in collected)
    ]
    assert not unknown, "TESTED names tests that pytest does not collect:\n" + "\n".join(unknown)


def test_relative_links_resolve() -> None:
    broken = []
    for page in pages():
        text = prose(page.read_text(encoding="utf-8"))
        for match in re.finditer(r"\]\(([^)\s]+)\)", text):
            link = match.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", link):  # http:, https:, mailto:
                continue
            target, _, anchor = link.partition("#")
            path = (page.parent / target).resolve() if target else page
            name = f"{page.relative_to(ROOT)}: {link}"
            if not path.is_relative_to(ROOT):
                broken.append(f"{name} (outside the repository)")
            elif not path.exists():
                broken.append(f"{name} (no such file)")
            elif anchor and path.suffix == ".md" and anchor not in anchors(path):
                broken.append(f"{name} (no heading with that anchor)")
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_setup_commands_are_what_ci_runs() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    language, _, lines = next(code_blocks(readme))
    first = commands_in(readme, "README.md")[:2]
    assert language == "bash" and [line for line in lines if line.strip()] == [c.command for c in first]
    assert [c.command for c in first] == ['pip install torch==2.13.0 -e ".[dev]"', "python -m pytest"]
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert ci.index(first[0].command) < ci.index(first[1].command)  # installs, then runs the default suite


def test_readme_is_short_and_links_every_page() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 150
    linked = {m.group(1) for m in re.finditer(r"\]\((docs/[^)#\s]+)", readme)}
    every = {str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")}
    assert every <= linked, f"pages the README does not link: {sorted(every - linked)}"


def config_keys(cls: Any, prefix: str = "") -> dict[str, Any]:
    """Dotted key -> default of every leaf field of a config dataclass tree."""
    keys: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = f.default
        if dataclasses.is_dataclass(default):
            keys.update(config_keys(type(default), f"{prefix}{f.name}."))
        else:
            keys[f"{prefix}{f.name}"] = default
    return keys


def shown(value: Any) -> str:
    """A default as the configuration page writes it (YAML spelling)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(shown(v) for v in value) + "]"
    return str(value)


def test_configuration_page_names_every_key_with_its_default() -> None:
    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    tagger, _, pretraining = text.partition("\n## Pretraining")
    assert pretraining, "docs/configuration.md has no '## Pretraining' section"
    for section, schema in ((tagger, TrainConfig), (pretraining, BilmPretrainConfig)):
        rows = dict(re.findall(r"^\| `([\w.]+)` \| `([^`]*)` \|", section, re.MULTILINE))
        expected = {key: shown(default) for key, default in config_keys(schema).items()}
        assert rows == expected, (
            f"{schema.__name__}: documented {rows}, ner_app/config/schema.py has {expected}"
        )


@pytest.mark.system
def test_python_examples_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # the examples name the shipped files relative to the checkout
    ran = 0
    for page in pages():
        for language, first, lines in code_blocks(page.read_text(encoding="utf-8")):
            if language == "python":
                code = compile("\n".join(lines), f"{page.relative_to(ROOT)}:{first}", "exec")
                exec(code, {"__name__": "docs_example"})
                ran += 1
    assert ran >= 1


def environment() -> dict[str, str]:
    """This checkout first on the import path (the editable install may point elsewhere), ../shared found."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, "NER_SHARED": str(SHARED)}


def as_documented(command: str) -> str:
    commands = {c.command for c in documented()}
    assert command in commands, f"not documented any more: {command}"
    return command


# Smoke commands that start several training or predicting processes (10-20 s): run with the slow tests, which CI runs
# too.
SLOW_SMOKE = {
    "epoch_speed",
    "encoder_speed",
    "step_overhead",
    "pretrain_speed",
    "early_errors",
    "cache_speed",
    "predict_folder",
    "embed_process",
    "partial_annotation",
    "memory",
}


@pytest.mark.system
@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_SMOKE else n for n in SMOKE]
)
def test_benchmark_smoke_command_runs(name: str) -> None:
    command, needs = SMOKE[name]
    if needs is not None:
        shared_path(*needs)
    argv = shlex.split(as_documented(command))
    assert argv[0] == "python"
    result = subprocess.run(
        [sys.executable, *argv[1:]], cwd=ROOT, env=environment(), capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "|---" in result.stdout and "skipped" not in result.stdout, result.stdout[-2000:]


@pytest.mark.system
def test_tiny_pretraining_commands_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shared_path("corpus", "news_pretrain.tok.txt")
    shared_path("data", "conll2003", "valid.txt")
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("NER_SHARED", str(SHARED))
    for command, steps in zip(TINY_PRETRAIN, (30, 40), strict=True):
        argv = shlex.split(as_documented(command))
        assert argv[:3] == ["python", "-m", "ner_app"]
        assert main([*argv[3:], f"output_dir={tmp_path / 'run'}"]) == 0  # output to tmp_path, not runs/
        assert PretrainMetrics.read(tmp_path / "run" / "metrics.json").steps == steps
