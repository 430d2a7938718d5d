#!/usr/bin/env bash
# Before (6137f47, /tmp/old) and after (/work/main), alternated, on the idle 2-core machine.
set -u
export NER_SHARED=/work/shared PYTHONUNBUFFERED=1
OUT=/work/main/results/redesign_speed
OLD=/tmp/old NEW=/work/main
run() { # name side command...
  local name=$1 side=$2; shift 2
  echo "### $name $side: $*" >> $OUT/$name.log
  ( cd $([ $side = before ] && echo $OLD || echo $NEW) && /usr/bin/time -f "wall %e s, max RSS %M KB" "$@" ) >> $OUT/$name.log 2>&1
}
rm -f $OUT/*.log $OUT/done
for round in 1 2; do
  run crf_speed before python benchmarks/crf_speed.py --threads 2 --repeats 7
  run crf_speed after python -m benchmarks.crf_speed --threads 2 --repeats 7
  run bilm_speed before python benchmarks/bilm_speed.py --size small --threads 2 --repeats 3 --batch 64
  run bilm_speed after python -m benchmarks.bilm_speed --size small --threads 2 --repeats 3 --batch 64
  run pretrain_speed before python benchmarks/pretrain_speed.py --threads 2 --repeats 7 --tokens 200000 --variants today --no-flops
  run pretrain_speed after python -m benchmarks.pretrain_speed --threads 2 --repeats 7 --tokens 200000 --variants today --no-flops
done
for i in 1 2 3 4 5 6; do
  run bilm_forward before python $OUT/bilm_forward_ab.py $OLD
  run bilm_forward after python $OUT/bilm_forward_ab.py $NEW
done
for side in before after; do
  rm -rf /tmp/epoch_$side
  run conll_epoch $side python train.py --config configs/conll2003_baseline.yaml output_dir=/tmp/epoch_$side trainer.max_epochs=1 trainer.threads=2 trainer.enable_progress_bar=false
done
echo done >> $OUT/done
