#!/usr/bin/env bash
# The GPU measurements in one detached run, each writing under OUT, each short enough that a machine taken
# back keeps what finished before it. Steps (default: gpu_check eval_part):
#   gpu_check    make gpu-check (~6 min cold: main's trainer and evaluator)
#   eval_part    issue 39's measured part: 8 problems x 12 = 96 requests at the `published` lengths (mean ~19k,
#                length seed $LENGTH_SEED, default 1) through the evaluator's path on the cycle's engine set-up
#                (the rollout engine's share, a PEFT-initialised adapter as a LoRARequest), every step traced,
#                stopped past $TIME_LIMIT s (default 840) of generation; ~3 min engine start + ~13 min.
#                Its record so far is rewritten every 30 s (aime_sized_eval_*_partial.json) for the polls.
#   eval_whole   the same part on an engine of its own at 0.9 of the GPU (--eval-engine-share 0.9: the eval with the
#                trainer's memory freed), LoRARequest: what the engine share buys at real lengths
#   eval_merged  the same on the cycle's engine without the adapter (--eval-without-adapter: the merged weights'
#                speed, what eval.merge_lora=true gives a cycle; benchmarks/eval_levers.py projects 40.7-47.2 min)
#   eval_cycle   the same part as a finished cycle serves it (after gpu_check: its seed-1 run dir, config, final
#                checkpoint and merge check; --adapter-from): the default eval.engine=own, merged where checked
#   step_profile one more cycle of gpu_check's configuration whose last step runs under torch.profiler
#                (benchmarks/profile_step.py; after gpu_check, its world; ~3 min)
#   eval_profile the eval's decode step at a part's 96 sequences under vLLM's torch profiler, seeded and unseeded:
#                kernel time by kind and the GPU's idle share (benchmarks/profile_eval_step.py; after gpu_check, its
#                world; ~3 min PROJECTED: not yet run on a GPU, written on 2026-12-06 when none was lent)
#   merge_100    the same for a recipe-length adapter, 100 steps at learning_rate 2e-5: does its delta survive the
#                bf16 merge (its merge_check.json)? A 3-step adapter's does not; 100 steps pass. ~13 min on an H100
#   merge_20     the same at 20 steps (~6 min on an H100, PROJECTED): an adapter whose effect likely outgrows the merge's bf16 rounding (untested)
#                (100 steps passed the merge check on 2026-12-06, 0.0189 nats against 0.605), for eval_cycle_merged
#   eval_cycle_merged  eval_cycle's part as the cycle serves the newest merge_* run's checkpoint (after merge_20 or
#                merge_100): merged weights on an engine of its own where its merge check passed, the path a
#                recipe-length adapter takes (issue 49's done-when)
#   eval_rollout the same part on the engine set-up before eval.engine=own (--override eval.engine=rollout: the
#                rollout engine's share, the adapter as a LoRARequest): the baseline, on the same machine
#   eval_fp8     the same with eval.kv_cache_dtype=fp8 (its own engine at 0.9): half the KV bytes a token
#                (each of the three: ~3 min engine start + $TIME_LIMIT; 420 s each fits two of them beside gpu_check)
#   compare_fp8  `python -m opsd_sweep.evaluate compare` of fp8 against auto KV cache on gpu_check's seed-1 checkpoint
#                (benchmarks/compare_on_gpu.py; after gpu_check; two engine starts, ~3-4 min)
#   shared_tail  two checkpoints' AIME24-sized evals in one engine: at the published lengths ~2 x 55 min,
#                beyond one session (bench_shared_tail.py --lengths short for the old probe)
#   eval_default part 2 alone with the cycle's evaluator, 360 requests: at the published lengths ~55 min,
#                beyond one session; eval_part measures a part of it and projects the rest.
# progress.log says what finished when; gpu_memory.log each process's GPU memory every 10 s. Start it detached
# and follow progress.log; the device machine must
# stay busy (a poll each few minutes, and each poll copies what has finished to $OUT: a machine lost between
# two polls takes its files with it):
#   export PYTHONPATH=/tmp/site:$PWD/src NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
#   setsid nohup bash benchmarks/gpu_session.sh /tmp/res > /tmp/gpu_session.out 2>&1 < /dev/null &
# A poll that kept the machine and its files on 2026-12-03 (a call waits until a step ends, up to ~9.5 min):
#   for i in $(seq 1 57); do grep -q "eval_default exit" /tmp/res/progress.log && break; sleep 10; done
#   cat /tmp/res/progress.log; tar czf $OUT/res.tgz --exclude='*.safetensors' --exclude='*.bin' -C /tmp res
set -u
OUT=${1:?usage: gpu_session.sh OUT_DIR [STEP...] (default: gpu_check eval_part)}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
step() {  # name, command...: run one measurement, log its exit status, go on to the next either way
    local name=$1; shift
    echo "$(date -u +%H:%M:%S) $name started" >> "$OUT/progress.log"
    "$@" > "$OUT/$name.log" 2>&1
    local code=$?  # before the $(date) below, which would put its own status in $?
    echo "$(date -u +%H:%M:%S) $name exit $code" >> "$OUT/progress.log"
}
part() {  # name, probe options...: issue 39's measured part (96 published-length requests, traced, cut at $TIME_LIMIT s)
    local name=$1; shift
    step "$name" python3 -m benchmarks.bench_cycle --work /tmp/be --out "$OUT/$name" --eval-only --adapter init \
        --eval-problems 8 --lengths published --length-seed "${LENGTH_SEED:-1}" --time-limit "${TIME_LIMIT:-840}" "$@"
}
cycle_part() {  # name, run dir: the same part as the cycle serves that run's final checkpoint (its config, merge check)
    local name=$1 run_dir=$2
    step "$name" python3 -m benchmarks.bench_cycle --work /tmp/be --out "$OUT/$name" --eval-only --adapter-from "$run_dir" \
        --eval-problems 8 --lengths published --length-seed "${LENGTH_SEED:-1}" --time-limit "${TIME_LIMIT:-840}"
}
steps=("${@:2}")
[ ${#steps[@]} -gt 0 ] || steps=(gpu_check eval_part)
for name in "${steps[@]}"; do  # a misspelt step is refused before any GPU time is spent
    case $name in
        gpu_check|eval_part|eval_cycle|eval_cycle_merged|step_profile|eval_profile|merge_100|merge_20|eval_rollout|eval_whole|eval_merged|eval_fp8|compare_fp8|shared_tail|eval_default) ;;
        *) echo "gpu_session: no step $name (gpu_check, eval_part, eval_cycle, eval_cycle_merged, step_profile, eval_profile, merge_100, merge_20, eval_rollout, eval_whole, eval_merged, eval_fp8, compare_fp8, shared_tail," \
                "eval_default)"; exit 2 ;;
    esac
done
# each process's GPU memory every 10 s, for what a step's logs cannot say (e.g. which process holds the ~4 GB that
# left gpu-check's eval 0.851 of the H100, not 0.9, on 2026-12-06)
( while sleep 10; do
      echo "$(date -u +%H:%M:%S) $(nvidia-smi --query-gpu=memory.used --format=csv,noheader)"
      nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader
      ps -eo pid,args | grep -E "opsd_sweep|benchmarks|EngineCore|VLLM" | grep -v grep | cut -c1-160
  done ) > "$OUT/gpu_memory.log" 2>&1 &
sampler=$!
trap 'kill $sampler 2>/dev/null' EXIT
for name in "${steps[@]}"; do
    case $name in
        gpu_check) step gpu_check python3 -m opsd_sweep.gpu_check --work /tmp/gc --out "$OUT/gc" ;;
        eval_part) part eval_part ;;
        eval_cycle) cycle_part eval_cycle "$(ls -d /tmp/gc/results/gpu-check/*-s1-* | head -1)" ;;
        eval_cycle_merged) cycle_part eval_cycle_merged "$(ls -td /tmp/gc/profile_results/steps*-lr2e-05/*-s3-* | head -1)" ;;
        step_profile) step step_profile python3 -m benchmarks.profile_step --work /tmp/gc --out "$OUT/step_profile" ;;
        eval_profile) step eval_profile python3 -m benchmarks.profile_eval_step --work /tmp/gc --out "$OUT/eval_profile" ;;
        merge_100) step merge_100 python3 -m benchmarks.profile_step --work /tmp/gc --out "$OUT/merge_100" --steps 100 \
                       --learning-rate 2e-5 ;;
        merge_20) step merge_20 python3 -m benchmarks.profile_step --work /tmp/gc --out "$OUT/merge_20" --steps 20 \
                      --learning-rate 2e-5 ;;
        eval_rollout) part eval_rollout --override eval.engine=rollout ;;
        eval_whole) part eval_whole --eval-engine-share 0.9 ;;
        eval_merged) part eval_merged --eval-without-adapter ;;
        eval_fp8) part eval_fp8 --eval-kv-cache fp8 ;;
        compare_fp8) step compare_fp8 python3 -m benchmarks.compare_on_gpu --work /tmp/gc --out "$OUT/compare_fp8" ;;
        shared_tail) step shared_tail python3 -m benchmarks.bench_shared_tail --work /tmp/be --out "$OUT/shared_tail" \
                         --checkpoints 2 ;;
        eval_default) step eval_default python3 -m benchmarks.bench_cycle --work /tmp/be --out "$OUT/eval_default" \
                          --eval-only ;;
    esac
done
echo "$(date -u +%H:%M:%S) done" >> "$OUT/progress.log"
