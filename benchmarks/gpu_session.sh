#!/usr/bin/env bash
# Issue 23's GPU measurements in one detached run, in order of need, each writing under OUT, each short
# enough that a machine taken back keeps what finished before it. Where does the AIME24-sized eval's tail
# go (the last 5% of its samples take 42-47% of it, FP8 or not)? First gc/ (make gpu-check, ~5 min: main's
# trainer and evaluator), then three runs of part 2 alone, each with every engine step timed (~9 min each;
# the 1-step cycle for their adapter runs once, in /tmp/be): eval_base/ (the base model without LoRA: merged
# weights' speed), eval_default/ (the cycle's evaluator: the trace to compare with), eval_flashinfer/
# (FlashInfer's attention kernels).
# progress.log says what finished when. Start it detached and follow progress.log; the device machine must
# stay busy (a poll each few minutes):
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
step eval_base python3 benchmarks/bench_cycle.py --work /tmp/be --out "$OUT/eval_base" --eval-only --eval-without-adapter
step eval_default python3 benchmarks/bench_cycle.py --work /tmp/be --out "$OUT/eval_default" --eval-only
step eval_flashinfer python3 benchmarks/bench_cycle.py --work /tmp/be --out "$OUT/eval_flashinfer" --eval-only \
    --eval-attention-backend FLASHINFER
echo "$(date -u +%H:%M:%S) done" >> "$OUT/progress.log"
