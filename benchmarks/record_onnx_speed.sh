#!/usr/bin/env bash
# The ONNX export against the torch predictor (python -m benchmarks.onnx_speed), recorded as
# results/onnx_speed/onnx_speed.log with the date and the load average: run under nice, one thread each, the
# two implementations alternated (common.interleaved), so that a machine shared with a training job slows both
# alike. NER_SHARED: the research data (default ../shared beside the checkout).
set -u
cd "$(dirname "$0")/.."
export NER_SHARED=${NER_SHARED:-$(pwd)/../shared} PYTHONUNBUFFERED=1
OUT=results/onnx_speed
echo "### nice python -m benchmarks.onnx_speed --threads 1 --repeats 3 ($(date -u +%Y-%m-%dT%H:%MZ), load average $(cut -d' ' -f1-3 /proc/loadavg))" > $OUT/onnx_speed.log
/usr/bin/time -f "wall %e s, max RSS %M KB" nice python -m benchmarks.onnx_speed --threads 1 --repeats 3 >> $OUT/onnx_speed.log 2>&1
