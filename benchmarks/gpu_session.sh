#!/usr/bin/env bash
# Issue 23's GPU measurements in one detached run, in order of need, each writing under OUT, each short
# enough that a machine taken back keeps what finished before it:
#   eval_fp8/ (the AIME24-sized eval alone on FP8 KV caches, after a 1-step cycle: bench_cycle --eval-only),
#   fp8/ (bench_cycle's sweep with FP8 KV caches for the rollouts and the eval, projected with eval_fp8's
#   record when it is there; its sweep passes gpu-check's per-cycle checks), gc/ (make gpu-check; its sweep
#   gives the default steady step), cycle/ (bench_cycle, default evaluator, the recorded AIME24-sized eval),
#   train/ (bench_train compute, compiled, with kernel tables). progress.log says what finished when.
# Start it detached and follow progress.log; the device machine must stay busy (a poll each few minutes):
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
# rollout.kv_cache_dtype=fp8 as in the sweep below, so the rollout engine (0.5 of the GPU) evaluates, as there
step eval_fp8 python3 benchmarks/bench_cycle.py --work /tmp/be_fp8 --out "$OUT/eval_fp8" --eval-only --eval-kv-cache fp8 \
    --override rollout.kv_cache_dtype=fp8
fp8_eval=$(ls "$OUT"/eval_fp8/aime_sized_eval_*_fp8.json 2>/dev/null | head -1)
eval_part=(--skip-eval) && [ -n "$fp8_eval" ] && eval_part=(--eval-from "$fp8_eval")  # the eval just measured
step bench_cycle_fp8 python3 benchmarks/bench_cycle.py --work /tmp/bc_fp8 --out "$OUT/fp8" --steps 4 \
    --eval-kv-cache fp8 --override rollout.kv_cache_dtype=fp8 "${eval_part[@]}"
# how big a cold machine's compile caches are once filled: can the next machine's first cycle carry them?
du -sh ~/.cache/vllm ~/.cache/flashinfer ~/.triton /tmp/torchinductor_"$(whoami)" >> "$OUT/progress.log" 2>&1
step gpu_check python3 -m opsd_sweep.gpu_check --work /tmp/gc --out "$OUT/gc"
step bench_cycle python3 benchmarks/bench_cycle.py --work /tmp/bc --out "$OUT/cycle" --steps 4 \
    --eval-from benchmarks/measured/aime_sized_eval_2026-12-02_max_num_seqs512.json
step bench_train python3 benchmarks/bench_train.py --parts compute --compile --micro-batches 8 --profile \
    --out "$OUT/train"
echo "$(date -u +%H:%M:%S) done" >> "$OUT/progress.log"
