#!/usr/bin/env bash
# The ONNX export against the torch predictor on the project's 2-core machine, which a training job shared
# at the time: run under nice, one thread each, the two implementations alternated (common.interleaved).
set -u
export NER_SHARED=${NER_SHARED:-/work/shared} PYTHONUNBUFFERED=1
cd "$(dirname "$0")/../.."
OUT=results/onnx_speed
echo "### nice python -m benchmarks.onnx_speed --threads 1 --repeats 3 ($(date -u +%Y-%m-%dT%H:%MZ), load average $(cut -d' ' -f1-3 /proc/loadavg))" > $OUT/onnx_speed.log
/usr/bin/time -f "wall %e s, max RSS %M KB" nice python -m benchmarks.onnx_speed --threads 1 --repeats 3 >> $OUT/onnx_speed.log 2>&1
