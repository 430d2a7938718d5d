#!/usr/bin/env bash
# Speed of two checkouts side by side, alternated so that a busy machine slows both alike: the CRF, the biLM,
# a pretraining step and a biLM forward, each in two rounds, then one CoNLL-2003 training epoch each. Every
# benchmark runs in its own checkout (python -m benchmarks.NAME there), except bilm_forward.py, the same
# script timing either checkout's biLM. Logs go to OUT/NAME.log, raw, each run headed by its command.
#
#   benchmarks/before_after.sh BEFORE_CHECKOUT AFTER_CHECKOUT OUT_DIR
#
# NER_SHARED (the research data, default: ../shared beside AFTER_CHECKOUT) must hold CoNLL-2003 for the epoch.
set -u
if [ $# -ne 3 ]; then
  echo "usage: $0 BEFORE_CHECKOUT AFTER_CHECKOUT OUT_DIR" >&2
  exit 2
fi
OLD=$(cd "$1" && pwd) NEW=$(cd "$2" && pwd)
mkdir -p "$3" && OUT=$(cd "$3" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
export NER_SHARED=${NER_SHARED:-$NEW/../shared} PYTHONUNBUFFERED=1
run() { # name side command...
  local name=$1 side=$2 tree=$OLD
  shift 2
  [ "$side" = after ] && tree=$NEW
  echo "### $name $side: $*" >> "$OUT/$name.log"
  ( cd "$tree" && /usr/bin/time -f "wall %e s, max RSS %M KB" "$@" ) >> "$OUT/$name.log" 2>&1
}
rm -f "$OUT"/*.log "$OUT/done"
for round in 1 2; do
  for side in before after; do
    run crf_speed $side python -m benchmarks.crf_speed --threads 2 --repeats 7
    run bilm_speed $side python -m benchmarks.bilm_speed --size small --threads 2 --repeats 3 --batch 64
    run pretrain_speed $side python -m benchmarks.pretrain_speed --threads 2 --repeats 7 --tokens 200000 --variants today --no-flops
  done
done
for i in 1 2 3 4 5 6; do
  run bilm_forward before env PYTHONPATH="$OLD" python "$HERE/bilm_forward.py"
  run bilm_forward after env PYTHONPATH="$NEW" python "$HERE/bilm_forward.py"
done
EPOCHS=$(mktemp -d)
for side in before after; do
  run conll_epoch $side python train.py --config configs/conll2003_baseline.yaml output_dir="$EPOCHS/$side" \
    trainer.max_epochs=1 trainer.threads=2 trainer.enable_progress_bar=false
done
rm -rf "$EPOCHS"
echo done >> "$OUT/done"
