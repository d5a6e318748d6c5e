#!/usr/bin/env bash
# Issue 23's GPU measurements in one detached run, in order of need, each writing under OUT, each short
# enough that a machine taken back keeps what finished before it. First gc/ (make gpu-check, ~7 min cold:
# main's trainer and evaluator), then merged/ (a 3-cycle sweep of 2 steps with eval.merge_lora=true: the
# rollout engine serves each cycle's eval with the merged model dir's weights loaded, the path not yet run
# on a GPU; its eval generation against gc/'s, and the CPU merge in its fixed cost) and merge_cpu (that merge
# alone on the device's CPU, ~1 min), then two runs of part 2
# alone, each with every engine step timed (~10 min each; the 1-step cycle for their adapter runs once, in
# /tmp/be): eval_base/ (the base model without LoRA: the merged weights' speed) and eval_default/ (the
# cycle's evaluator, a LoRARequest: the trace to compare with).
# progress.log says what finished when. Start it detached and follow progress.log; the device machine must
# stay busy (a poll each few minutes, and each poll copies what has finished to $OUT: a machine lost between
# two polls takes its files with it):
#   export PYTHONPATH=/tmp/site:$PWD/src NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
#   setsid nohup bash benchmarks/gpu_session.sh /tmp/res > /tmp/gpu_session.out 2>&1 &
set -u
OUT=${1:?usage: gpu_session.sh OUT_DIR}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
step() {  # name, command...: run one measurement, log its exit status, go on to the next either way
    local name=$1; shift
    echo "$(date -u +%H:%M:%S) $name started" >> "$OUT/progress.log"
    "$@" > "$OUT/$name.log" 2>&1
    echo "$(date -u +%H:%M:%S) $name exit $?" >> "$OUT/progress.log"
}
step gpu_check python3 -m opsd_sweep.gpu_check --work /tmp/gc --out "$OUT/gc"
step merged python3 benchmarks/bench_cycle.py --work /tmp/bm --out "$OUT/merged" --steps 2 --skip-eval \
    --override eval.merge_lora=true
step merge_cpu python3 benchmarks/bench_merge.py --work /tmp/bm --out "$OUT/merge_cpu"
step eval_base python3 benchmarks/bench_cycle.py --work /tmp/be --out "$OUT/eval_base" --eval-only --eval-without-adapter
step eval_default python3 benchmarks/bench_cycle.py --work /tmp/be --out "$OUT/eval_default" --eval-only
echo "$(date -u +%H:%M:%S) done" >> "$OUT/progress.log"
