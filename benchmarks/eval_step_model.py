"""What one engine serving several evaluations at once could buy, projected from an eval trace (issue 23).

    python3 benchmarks/eval_step_model.py benchmarks/measured/aime_sized_eval_2026-12-03_auto_without_adapter.json

An AIME24-sized eval decodes as many engine steps as its longest sample has tokens, and 40% of its time
goes to steps with 16 or fewer sequences. Several checkpoints' (or cycles') evals in one engine would decode
their tails side by side. Whether that pays depends on what an engine step costs: a part paid once a step
(weights, launches) is shared; the KV cache each sequence reads is not. This replays the traced eval's
schedule (bench_vllm_tp_dp.decode_schedule: all requests submitted at once, admitted in order up to
max_num_seqs, one token a step each, as the trace's step counts confirm), fits step seconds = a + b x (KV
tokens read that step) to the trace's per-band seconds by least squares, and projects 1..N copies of the
eval (copy c drawn with --length-seed + c, as bench_shared_tail.py draws them) in one engine. A PROJECTION:
the replay has no preemption, so a projection whose peak KV exceeds the engine's KV cache is optimistic
(the peak is printed in GB beside it).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_vllm_tp_dp import PROMPT_TOKENS, decode_schedule, draw_lengths  # noqa: E402
from eval_trace import SEQUENCE_BANDS  # noqa: E402

KV_BYTES_PER_TOKEN = 28 * 8 * 128 * 2 * 2  # Qwen3-1.7B: layers x KV heads x head dim x (K, V) x bf16


def replay(lengths: list[int], max_num_seqs: int, prompt_tokens: int) -> np.ndarray:
    """One row per engine step: (sequences decoding, KV tokens they read), all submitted at once."""
    n = len(lengths)
    return np.array(decode_schedule([prompt_tokens] * n, lengths, [0] * n, max_num_seqs), dtype=float)


def band_of(sequences: np.ndarray, max_num_seqs: int) -> list[str]:
    """Each step's band label as eval_trace.summarize_steps writes it."""
    labels = []
    for n in sequences:
        for low, high in SEQUENCE_BANDS:
            if n >= low and (high is None or n <= high):
                labels.append(f"{low}-{high or max_num_seqs}")
                break
    return labels


def fit_step_cost(record: dict, steps: np.ndarray) -> tuple[float, float, list[dict]]:
    """(a seconds a step, b seconds per million KV tokens read) fitted to the trace's bands, and each band's
    traced vs replayed steps and traced vs fitted seconds."""
    max_num_seqs = record["max_num_seqs"]
    labels = np.array(band_of(steps[:, 0], max_num_seqs))
    rows, seconds, bands = [], [], []
    for band in record["engine_steps"]["by_sequences"]:
        chosen = steps[labels == band["sequences"]]
        rows.append([len(chosen), chosen[:, 1].sum() / 1e6])
        seconds.append(band["seconds"])
    (a, b), *_ = np.linalg.lstsq(np.array(rows), np.array(seconds), rcond=None)
    for band, (count, kv) in zip(record["engine_steps"]["by_sequences"], rows):
        bands.append({"sequences": band["sequences"], "traced_steps": band["steps"], "replayed_steps": int(count),
                      "traced_s": band["seconds"], "fitted_s": round(a * count + b * kv, 1)})
    return float(a), float(b), bands


def engine_seconds(a: float, b: float, lengths: list[int], max_num_seqs: int,
                   prompt_tokens: int) -> tuple[float, np.ndarray]:
    """The fitted seconds of one engine serving `lengths`, and its replayed steps."""
    steps = replay(lengths, max_num_seqs, prompt_tokens)
    return a * len(steps) + b * steps[:, 1].sum() / 1e6, steps


def project(a: float, b: float, copies: int, requests: int, length_seed: int, max_num_seqs: int,
            prompt_tokens: int) -> dict:
    """`copies` evals in one engine at once, against the same evals one after another (each its own draw)."""
    draws = [draw_lengths(requests, length_seed + copy) for copy in range(copies)]
    shared, steps = engine_seconds(a, b, [x for draw in draws for x in draw], max_num_seqs, prompt_tokens)
    one_by_one = sum(engine_seconds(a, b, draw, max_num_seqs, prompt_tokens)[0] for draw in draws)
    return {"copies": copies, "max_num_seqs": max_num_seqs, "steps": len(steps), "projected_s": round(shared, 1),
            "one_after_another_s": round(one_by_one, 1), "ratio": round(shared / one_by_one, 3),
            "peak_kv_gb": round(steps[:, 1].max() * KV_BYTES_PER_TOKEN / 1e9, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("record", type=Path, help="an aime_sized_eval record with engine_steps (bench_cycle.py)")
    parser.add_argument("--copies", type=int, nargs="+", default=[1, 2, 3, 4])
    parser.add_argument("--max-num-seqs", type=int, nargs="+", default=None,
                        help="engine sizes to project (default: the record's)")
    parser.add_argument("--length-seed", type=int, default=0, help="the record's (bench_cycle.py --length-seed)")
    parser.add_argument("--prompt-tokens", type=int, default=PROMPT_TOKENS)
    parser.add_argument("--out", type=Path, default=None, help="also write the figures here as JSON")
    args = parser.parse_args()

    record = json.loads(args.record.read_text())
    requests, max_num_seqs = record["requests"], record["max_num_seqs"]
    lengths = draw_lengths(requests, args.length_seed)
    if sum(lengths) != record["lengths"]["total"]:
        raise SystemExit(f"--length-seed {args.length_seed} draws {sum(lengths):,} tokens, the record "
                         f"{record['lengths']['total']:,}: pass the seed its command used")
    a, b, bands = fit_step_cost(record, replay(lengths, max_num_seqs, args.prompt_tokens))
    print(f"{args.record.name}: {record['generation_s']} s generation, adapter: {record['adapter']}")
    print(f"fit: step = {1000 * a:.2f} ms + {1000 * b:.1f} ms per million KV tokens read "
          f"(= {KV_BYTES_PER_TOKEN / (b / 1e6) / 1e12:.2f} TB/s over the KV cache)")
    for band in bands:
        print(f"  {band['sequences']:>7} sequences: steps traced {band['traced_steps']:>6} replayed "
              f"{band['replayed_steps']:>6}; seconds traced {band['traced_s']:6.1f} "
              f"fitted {band['fitted_s']:6.1f}")
    projections = [project(a, b, copies, requests, args.length_seed, size, args.prompt_tokens)
                   for size in args.max_num_seqs or [max_num_seqs] for copies in args.copies]
    print("PROJECTION, one engine, every copy's requests submitted at once, no preemption, against the same "
          "copies evaluated one after another:")
    for p in projections:
        print(f"  {p['copies']} cop{'y' if p['copies'] == 1 else 'ies'}, max_num_seqs {p['max_num_seqs']}: "
              f"{p['projected_s']:7.1f} s vs {p['one_after_another_s']:7.1f} s ({p['ratio']:.2f}x), "
              f"{p['steps']:,} steps, peak KV {p['peak_kv_gb']} GB")
    if args.out:
        args.out.write_text(json.dumps({"record": args.record.name, "step_s": a, "s_per_million_kv_tokens": b,
                                        "bands": bands, "projections": projections}, indent=1) + "\n")


if __name__ == "__main__":
    main()
