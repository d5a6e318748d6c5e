"""What each lever left in the eval would buy at real thinking lengths: a PROJECTION, to choose what to measure next.

    python -m benchmarks.eval_levers            # prints the table, writes measured/eval_levers_<date>.json

The 360-sample AIME24 eval (the `published` length model, seed 0) through eval_step_model's KV-limited scheduler,
priced by the step model refitted on the 2026-12-04 trace (a + b x KV tokens read a step), on:
- the cycle's engine (the rollout engine's 0.5 of the GPU, KV cache 614,240 tokens) or an engine of its own at 0.9
  (1,138,448 tokens: the trainer's memory freed; both KV caches as vLLM reported them on the H200);
- LoRARequest serving (a, the fit) or merged weights (eval.merge_lora=true), priced two ways that bracket it: a =
  2.26 ms (the fit at the merged weights' speed of 2026-12-03) with b of the real-length trace, or that fit whole
  (2.26 ms + 32.0 ms per million KV tokens, fitted at 4.8k-token lengths: its b is the real-length trace's x1.19);
- a bf16 or an fp8 KV cache (fp8 ASSUMED to halve b and the bytes a token, and to double the tokens the cache holds:
  at 4.8k-token lengths the fp8 eval measured only -8%, so its rows are the optimistic end).
Every row is a projection, none a measurement: bench_cycle's --eval-engine-share, --eval-without-adapter and
--eval-kv-cache probes (gpu_session.sh steps eval_whole, eval_merged, eval_fp8) measure them on the GPU.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from opsd_sweep.costs import length_model
from benchmarks.eval_step_model import KV_BYTES_PER_TOKEN, MERGED_STEP_S, predict_eval
from benchmarks.records import MEASURED, record_head, write_record

FIT = MEASURED / "eval_step_model_2026-12-04_published_part.json"
CYCLE_KV, OWN_KV = 614_240, 1_138_448  # tokens: the rollout engine at 0.5, an engine at 0.9 (H200, bf16)
MERGED_FIT = MEASURED / "eval_step_model_2026-12-04.json"  # the merged weights' speed, at 4.8k-token lengths
PROMPT_TOKENS = 157  # the traced part's prompts were 155-159 tokens


def levers(a: float, b: float, merged_b: float) -> list[tuple[str, float, float, int, int, int]]:
    """(name, step s, s per million KV tokens, KV cache tokens, max_num_seqs, KV bytes a token) per row."""
    fp8 = dict(b=b / 2, kv=2 * OWN_KV, bytes=KV_BYTES_PER_TOKEN // 2)
    return [("cycle's engine (0.5), LoRARequest: today's default", a, b, CYCLE_KV, 256, KV_BYTES_PER_TOKEN),
            ("cycle's engine (0.5), merged (eval.merge_lora=true)", MERGED_STEP_S, b, CYCLE_KV, 256, KV_BYTES_PER_TOKEN),
            ("cycle's engine (0.5), merged, the merged fit whole", MERGED_STEP_S, merged_b, CYCLE_KV, 256,
             KV_BYTES_PER_TOKEN),
            ("own engine (0.9), LoRARequest", a, b, OWN_KV, 256, KV_BYTES_PER_TOKEN),
            ("own engine (0.9), merged", MERGED_STEP_S, b, OWN_KV, 256, KV_BYTES_PER_TOKEN),
            ("own engine (0.9), merged, the merged fit whole", MERGED_STEP_S, merged_b, OWN_KV, 256, KV_BYTES_PER_TOKEN),
            ("own engine (0.9), fp8 KV, LoRARequest", a, fp8["b"], fp8["kv"], 256, fp8["bytes"]),
            ("own engine (0.9), fp8 KV, LoRARequest, max_num_seqs 512", a, fp8["b"], fp8["kv"], 512, fp8["bytes"]),
            ("own engine (0.9), fp8 KV, merged", MERGED_STEP_S, fp8["b"], fp8["kv"], 256, fp8["bytes"])]


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=None, help="default: benchmarks/measured/eval_levers_<date>.json")
    args = parser.parse_args(argv)
    fit = json.loads(FIT.read_text())["fit"]
    lengths = length_model.published().draw(30, 12, 0)
    prompts = [PROMPT_TOKENS] * len(lengths)
    rows, bf16_floor = [], None
    print("| PROJECTION: the 360-sample eval on | steps | preemptions | minutes | its KV-read floor | / bf16 floor |")
    print("|---|---|---|---|---|---|")
    merged_b = json.loads(MERGED_FIT.read_text())["s_per_million_kv_tokens"]
    for name, a, b, kv, seqs, per_token in levers(fit["step_s"], fit["s_per_million_kv_tokens"], merged_b):
        r = predict_eval(a, b, lengths, prompts, seqs, kv, per_token)
        bf16_floor = bf16_floor or r["eval_floor_s"]
        row = {"lever": name, "step_s": a, "s_per_million_kv_tokens": b, **r,
               "minutes": round(r["seconds"] / 60, 1), "over_bf16_floor": round(r["seconds"] / bf16_floor, 3)}
        rows.append(row)
        print(f"| {name} | {r['steps']:,} | {r['preemptions']:,} | {row['minutes']} | "
              f"{r['eval_floor_s'] / 60:.1f} | {row['over_bf16_floor']:.2f}x |", flush=True)
    record = {**record_head("eval_levers", argv),
              "label": "PROJECTION", "fit": FIT.name, "merged_fit": MERGED_FIT.name, "length_model": "published", "length_seed": 0,
              "requests": len(lengths), "rows": rows}
    write_record(record, "eval_levers", args.out)
    return record


if __name__ == "__main__":
    main()
