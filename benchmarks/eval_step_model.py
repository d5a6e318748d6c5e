"""The eval engine's step cost, fitted to a traced eval, and what it projects (issues 23 and 39).

    python3 -m benchmarks.eval_step_model benchmarks/measured/aime_sized_eval_2026-12-03_auto_without_adapter.json
    python3 -m benchmarks.eval_step_model RECORD.json --project-requests 360 --out FIT.json   # a traced part

An AIME24-sized eval decodes as many engine steps as its longest sample has tokens; a step costs a part paid
once a step (weights, launches) and the KV cache every sequence in it reads. This fits step seconds =
a + b x (KV tokens read that step) to a traced eval and projects other evals with it:

- a record with a per-step trace (`step_trace`: bench_cycle.py since issue 39 records every engine step's
  seconds, sequences decoding and the KV tokens they read, from the engine's own outputs) is fitted step by
  step; its forced lengths are replayed through a scheduler limited by the engine's KV cache (vLLM's:
  requests admitted in order up to max_num_seqs while their blocks fit, the newest running request preempted
  and recomputed later when a step's blocks do not fit), and the replay's seconds against the measured
  generation seconds is the measured part's fit error; --project-requests N then PROJECTS an eval of N samples
  (N / 12 problems of the record's length model, the same seed) on the same engine;
- an older record (per-band seconds only) replays its lengths (redrawn from the short model with
  --length-seed) without a KV limit, as its trace's step counts confirm the engine ran it, fits the bands by
  least squares and projects 1..N copies of the eval in one engine (copy c drawn with --length-seed + c, as
  bench_shared_tail.py draws them).
Every projection is labelled PROJECTION; the replay leaves out the prefill a preempted request recomputes.
"""

from __future__ import annotations

import argparse
import json
from collections import deque
from pathlib import Path

import numpy as np

from opsd_sweep.costs import length_model
from benchmarks.bench_vllm_tp_dp import PROMPT_TOKENS, decode_schedule
from benchmarks.eval_trace import SEQUENCE_BANDS

KV_BYTES_PER_TOKEN = 28 * 8 * 128 * 2 * 2  # Qwen3-1.7B: layers x KV heads x head dim x (K, V) x bf16
BLOCK_SIZE = 16  # vLLM's KV-cache block, in tokens
WARMUP_STEPS = 20  # a trace's first steps: prefills and first-call kernel compiles, left out of the fit
# A later step this many times the median step is a one-time stall (seen: ~2 s once, 4,509 steps into the H100 parts
# of 2026-12-05, at 96 sequences): left out of the fit, its excess counted once, like the warm-up.
STALL_FACTOR = 20
# the per-step cost fitted to the 2026-12-03 trace at the merged weights' speed (no LoRA), over 1-256 sequences:
# what a step with fewer sequences than a cut trace holds costs at least (the low end of its projection)
MERGED_STEP_S = 2.26e-3
N_SAMPLES = 12


def draw_lengths(n: int, seed: int) -> list[int]:
    """The short model's draw (every record before issue 39 was forced to it)."""
    return length_model.short().draw(1, n, seed)


def prompts_of(prompt_tokens, n: int) -> list[int]:
    return list(prompt_tokens) if isinstance(prompt_tokens, (list, tuple)) else [int(prompt_tokens)] * n


def replay(lengths: list[int], max_num_seqs: int, prompt_tokens, kv_capacity: int | None = None) -> np.ndarray:
    """One row per engine step: (sequences decoding, KV tokens they read), all submitted at once; with
    kv_capacity (the engine's KV cache in tokens) scheduled as vLLM does when the cache runs short."""
    n = len(lengths)
    prompts = prompts_of(prompt_tokens, n)
    if kv_capacity is None:
        return np.array(decode_schedule(prompts, lengths, [0] * n, max_num_seqs), dtype=float)
    return kv_limited_schedule(prompts, lengths, max_num_seqs, kv_capacity)[0]


def kv_limited_schedule(prompt_lens: list[int], lengths: list[int], max_num_seqs: int, kv_capacity: int,
                        block_size: int = BLOCK_SIZE) -> tuple[np.ndarray, dict]:
    """vLLM's scheduler with a KV cache of kv_capacity tokens, every request submitted at once: each step the
    running requests (in admission order) take a slot for their next token, the newest running request
    preempted (its blocks freed, back to the front of the queue, its tokens kept) while they do not fit;
    in a step without preemption waiting requests are admitted in order while running < max_num_seqs and
    the blocks of their whole context fit (a preempted one recomputes it: counted, not timed); then every
    running request decodes a token. Returns the steps (sequences decoding, KV tokens read) and
    {preemptions, recomputed_tokens, peak_kv_tokens, steps}."""
    free = kv_capacity // block_size
    generated, held = [0] * len(lengths), [0] * len(lengths)
    waiting, running = deque(i for i, n in enumerate(lengths) if n > 0), []
    steps: list[tuple[int, int]] = []
    preemptions = recomputed = peak = 0
    while running or waiting:
        preempted, k = False, 0
        while k < len(running):  # room for every running request's next token, in admission order
            r = running[k]
            need = -(-(prompt_lens[r] + generated[r] + 1) // block_size) - held[r]
            while need > free and running:
                victim = running.pop()
                free, held[victim] = free + held[victim], 0
                waiting.appendleft(victim)
                preemptions, preempted = preemptions + 1, True
                if victim == r:
                    break
            if r not in running[k:k + 1]:  # r itself was preempted: nothing after it runs this step
                break
            free, held[r], k = free - need, held[r] + need, k + 1
        if not preempted:
            while waiting and len(running) < max_num_seqs:
                r = waiting[0]
                need = -(-(prompt_lens[r] + generated[r] + 1) // block_size)
                if need > free:
                    break
                waiting.popleft()
                running.append(r)
                free, held[r] = free - need, need
                recomputed += prompt_lens[r] + generated[r] if generated[r] else 0
        if not running:
            raise ValueError(f"a request of {prompt_lens[waiting[0]] + lengths[waiting[0]]} tokens does not fit a "
                             f"KV cache of {kv_capacity} tokens")
        kv = 0
        for r in running:
            generated[r] += 1
            kv += prompt_lens[r] + generated[r]
        steps.append((len(running), kv))
        peak = max(peak, kv)
        still = []
        for r in running:
            if generated[r] >= lengths[r]:
                free, held[r] = free + held[r], 0
            else:
                still.append(r)
        running = still
    return np.array(steps, dtype=float), {"steps": len(steps), "preemptions": preemptions,
                                          "recomputed_tokens": recomputed, "peak_kv_tokens": peak}


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


def fit_trace(trace: dict, warmup: int = WARMUP_STEPS, steps: slice | None = None,
              bytes_per_token: int = KV_BYTES_PER_TOKEN) -> dict:
    """Least squares step seconds = a + b x (million KV tokens read) over a per-step trace (step_trace:
    seconds, decoding, kv_tokens) after its first `warmup` steps (the prefills and the first calls' kernel
    compiles: seconds each) or over `steps`, with R^2, the residuals' SD, each band's traced vs fitted
    seconds and the rate b reads KV bytes at (bytes_per_token: the KV cache's dtype)."""
    seconds, kv = np.asarray(trace["seconds"], dtype=float), np.asarray(trace["kv_tokens"], dtype=float) / 1e6
    decoding = np.asarray(trace["decoding"])
    chosen = np.zeros(len(seconds), dtype=bool)
    chosen[steps if steps is not None else slice(warmup, None)] = True
    keep = chosen & (decoding > 0)  # a step that decoded nothing (a prefill chunk alone) is not a decode step
    stalls = keep & (seconds > STALL_FACTOR * np.median(seconds[keep]))
    keep &= ~stalls
    x = np.column_stack([np.ones(keep.sum()), kv[keep]])
    (a, b), *_ = np.linalg.lstsq(x, seconds[keep], rcond=None)
    residuals = seconds[keep] - x @ np.array([a, b])
    total = float(((seconds[keep] - seconds[keep].mean()) ** 2).sum())
    bands = []
    labels = np.array(band_of(decoding[keep], int(decoding.max())))
    for label in dict.fromkeys(labels):
        chosen_band = labels == label
        bands.append({"sequences": label, "steps": int(chosen_band.sum()),
                      "traced_s": round(float(seconds[keep][chosen_band].sum()), 1),
                      "fitted_s": round(float(a * chosen_band.sum() + b * kv[keep][chosen_band].sum()), 1)})
    return {"step_s": float(a), "s_per_million_kv_tokens": float(b), "steps_fitted": int(keep.sum()),
            "warmup_steps": warmup if steps is None else None,
            "warmup_seconds": round(float(seconds[:warmup].sum()), 2) if steps is None else None,
            "stall_steps": int(stalls.sum()),
            "stall_excess_s": round(float((seconds[stalls] - a - b * kv[stalls]).sum()), 2),
            "decoding_fitted": [int(decoding[keep].min()), int(decoding[keep].max())],
            "r2": round(1 - float(residuals @ residuals) / total, 4) if total > 0 else 1.0,
            "residual_sd_ms": round(1000 * float(residuals.std(ddof=2)), 3),
            "kv_read_tb_per_s": round(bytes_per_token / (b / 1e6) / 1e12, 2) if b > 0 else None, "bands": bands}


def engine_seconds(a: float, b: float, lengths: list[int], max_num_seqs: int, prompt_tokens,
                   kv_capacity: int | None = None) -> tuple[float, np.ndarray]:
    """The fitted seconds of one engine serving `lengths`, and its replayed steps."""
    steps = replay(lengths, max_num_seqs, prompt_tokens, kv_capacity)
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


def predict_eval(a: float, b: float, lengths: list[int], prompt_lens: list[int], max_num_seqs: int,
                 kv_capacity: int, bytes_per_token: int = KV_BYTES_PER_TOKEN, fitted_from: int = 1,
                 bandwidth: float = length_model.HBM_BYTES_PER_S) -> dict:
    """An eval's seconds on an engine of this KV cache, by the fitted step cost over the KV-limited replay,
    with its KV-read floor (length_model.kv_read_floor) beside it. A fit over steps of at least
    `fitted_from` sequences is extrapolated to the steps with fewer: `seconds_low` prices those at
    MERGED_STEP_S a step instead (the low end), `tail_steps` counts them; `bandwidth`: the GPU's floor rate."""
    steps, stats = kv_limited_schedule(prompt_lens, lengths, max_num_seqs, kv_capacity)
    seconds = float(a * len(steps) + b * steps[:, 1].sum() / 1e6)
    tail = int((steps[:, 0] < fitted_from).sum())
    floor = length_model.kv_read_floor(prompt_lens, lengths, bytes_per_token, seconds, bandwidth)
    return {"requests": len(lengths), "mean_tokens": round(float(np.mean(lengths)), 1), "total_tokens": sum(lengths),
            "at_cap": sum(x >= length_model.CAP for x in lengths), "kv_capacity_tokens": kv_capacity,
            "max_num_seqs": max_num_seqs, **stats, "seconds": round(seconds, 3),
            "tail_steps": tail, "seconds_low": round(seconds - tail * max(a - MERGED_STEP_S, 0), 3),
            "eval_floor_s": floor["eval_floor_s"], "eval_floor_ratio": float(floor["eval_floor_ratio"])}


def traced_part(record: dict, project_requests: list[int], capacities: list[int],
                warmup: int = WARMUP_STEPS) -> dict:
    """A record with a per-step trace (a finished part, or one cut short: its trace so far): the fit, its
    errors, the whole part replayed and the PROJECTION of evals of `project_requests` samples on engines of
    these KV caches (the record's by default). The errors: `fit_error`, the replayed schedule at the fit
    over the traced steps against their traced seconds (after the warm-up); `holdout_error`, the fit on the
    first half of those steps predicting the second half's seconds from its traced KV reads; `schedule`, the
    replay's sequences decoding and KV reads against the trace's, step by step."""
    trace = record["step_trace"]
    traced_steps = len(trace["seconds"])
    if traced_steps <= 2 * warmup:
        raise ValueError(f"{traced_steps} traced steps: too few to fit after {warmup} warm-up steps")
    bpt = record.get("kv_bytes_per_token", KV_BYTES_PER_TOKEN)
    fit = fit_trace(trace, warmup, bytes_per_token=bpt)
    a, b = fit["step_s"], fit["s_per_million_kv_tokens"]
    lengths, prompts = record["forced_lengths"], record["prompt_lengths"]
    capacity, max_num_seqs = record["kv_cache_tokens"], record["max_num_seqs"]
    complete = record.get("status", "complete") == "complete"
    steps, stats = kv_limited_schedule(prompts, lengths, max_num_seqs, capacity)
    seconds, kv = np.asarray(trace["seconds"]), np.asarray(trace["kv_tokens"], dtype=float)
    decoding = np.asarray(trace["decoding"])
    n = min(traced_steps, len(steps))
    replayed = steps[warmup:n]
    traced_s = float(seconds[warmup:n].sum())
    middle = warmup + (n - warmup) // 2
    half = fit_trace(trace, steps=slice(warmup, middle))
    second = float(half["step_s"] * (n - middle) + half["s_per_million_kv_tokens"] * kv[middle:n].sum() / 1e6)
    bandwidth = length_model.hbm_bytes_per_s(record.get("device"))
    traced_floor_s = kv.sum() * bpt / bandwidth
    once = fit["warmup_seconds"] + fit["stall_excess_s"]  # the warm-up and the stalls, as traced
    whole = float(once + a * (len(steps) - warmup) + b * steps[warmup:, 1].sum() / 1e6)
    tail = int((steps[warmup:, 0] < fit["decoding_fitted"][0]).sum())
    whole_low = whole - tail * max(a - MERGED_STEP_S, 0)
    floor = length_model.kv_read_floor(prompts, lengths, bpt, whole, bandwidth)
    part = {"device": record.get("device"), "hbm_bytes_per_s": bandwidth,
            "requests": len(lengths), "complete": complete, "mean_tokens": round(float(np.mean(lengths)), 1),
            "total_tokens": sum(lengths), "at_cap": sum(x >= length_model.CAP for x in lengths),
            "kv_capacity_tokens": capacity, "max_num_seqs": max_num_seqs,
            "traced": {"steps": traced_steps, "seconds": round(float(seconds.sum()), 1),
                       "done": record.get("done", record.get("done_so_far", len(lengths) if complete else None)),
                       "decoding": [int(decoding[warmup:].min()), int(decoding[warmup:].max())],
                       "kv_read_tokens": int(kv.sum()), "floor_s": round(float(traced_floor_s), 1),
                       "floor_ratio": round(float(seconds.sum() / traced_floor_s), 3),
                       # where the traced seconds went, by the fit: per step, per KV token read, and once
                       "split_s": {"fixed": round(float(a * (traced_steps - warmup)), 1),
                                   "kv": round(float(b * kv[warmup:].sum() / 1e6), 1), "once": round(once, 1)}},
            "fit_error": round(float(a * len(replayed) + b * replayed[:, 1].sum() / 1e6 + fit["stall_excess_s"])
                               / traced_s - 1, 4),
            "holdout_error": round(second / float(seconds[middle:n].sum()) - 1, 4),
            "schedule": {"mean_abs_decoding_diff": round(float(np.abs(steps[:n, 0] - decoding[:n]).mean()), 2),
                         "kv_read_ratio": round(float(steps[:n, 1].sum() / kv[:n].sum()), 4)},
            "replayed": {**stats, "label": "measured" if complete else "PROJECTION", "seconds": round(whole, 1),
                         "tail_steps": tail, "seconds_low": round(whole_low, 1),
                         "eval_floor_s": floor["eval_floor_s"], "eval_floor_ratio": floor["eval_floor_ratio"]}}
    if complete:
        part["measured_s"] = record["generation_s"]
        part["whole_fit_error"] = round(whole / record["generation_s"] - 1, 4)
    model = record["length_model"]
    if model["name"] == "sweep":
        lengths_model = length_model.sweep(Path(model["parameters"]["source"]))
    else:
        lengths_model = length_model.parse(model["name"])
    mean_prompt = round(float(np.mean(prompts)))
    projections = []
    for requests in project_requests:
        drawn = lengths_model.draw(requests // N_SAMPLES, N_SAMPLES, record.get("projection_seed", 0))
        for kv_capacity in capacities or [capacity]:
            predicted = predict_eval(a, b, drawn, [mean_prompt] * len(drawn), max_num_seqs, kv_capacity, bpt,
                                     fitted_from=fit["decoding_fitted"][0], bandwidth=bandwidth)
            for key in ("seconds", "seconds_low"):  # the warm-up and the stalls as traced
                predicted[key] = round(predicted[key] + once, 1)
            predicted["eval_floor_ratio"] = round(predicted["seconds"] / predicted["eval_floor_s"], 3)
            projections.append({"label": "PROJECTION", **predicted, "length_model": lengths_model.describe(drawn)})
    return {"fit": fit, "measured_part": part, "projections": projections}


def cut_at(record: dict, seconds: float) -> dict:
    """The record as if its part had been cut after `seconds` of traced steps: two parts cut at different
    times are compared over the same span of the eval (the crowded start costs more per KV byte)."""
    trace = record["step_trace"]
    steps = int(np.searchsorted(np.cumsum(trace["seconds"]), seconds, side="right"))
    return record | {"status": f"cut at {seconds:g} s", "done_so_far": None,
                     "step_trace": {key: values[:steps] for key, values in trace.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("record", type=Path, help="an aime_sized_eval record with engine_steps (bench_cycle.py)")
    parser.add_argument("--copies", type=int, nargs="+", default=[1, 2, 3, 4])
    parser.add_argument("--max-num-seqs", type=int, nargs="+", default=None,
                        help="engine sizes to project (default: the record's)")
    parser.add_argument("--length-seed", type=int, default=0, help="the record's (bench_cycle.py --length-seed)")
    parser.add_argument("--prompt-tokens", type=int, default=PROMPT_TOKENS)
    parser.add_argument("--project-requests", type=int, nargs="+", default=[360],
                        help="a record with a step trace: project evals of these many samples (12 a problem)")
    parser.add_argument("--kv-capacity", type=int, nargs="+", default=None,
                        help="a record with a step trace: project on engines of these KV caches, in tokens "
                             "(default: the record's engine's)")
    parser.add_argument("--cut-at-s", type=float, default=None,
                        help="a record with a step trace: use only its first this many seconds of steps")
    parser.add_argument("--out", type=Path, default=None, help="also write the figures here as JSON")
    args = parser.parse_args()

    record = json.loads(args.record.read_text())
    if args.cut_at_s is not None:
        record = cut_at(record, args.cut_at_s)
    if "step_trace" in record:
        figures = traced_part(record, args.project_requests, args.kv_capacity)
        fit, part = figures["fit"], figures["measured_part"]
        traced = part["traced"]
        print(f"{args.record.name}: {record['requests']} requests, lengths {record['length_model']['name']} (mean "
              f"{part['mean_tokens']}, {part['at_cap']} at the cap), adapter {record['adapter']}, KV cache "
              f"{part['kv_capacity_tokens']:,} tokens; " + (f"{record['generation_s']} s generation" if part["complete"]
              else f"CUT SHORT: {traced['steps']:,} steps traced ({traced['seconds']} s, {traced['done']} done)"))
        split = traced["split_s"]
        print(f"traced: {traced['seconds']} s of steps, KV-read floor {traced['floor_s']} s at {part['device'] or 'H200'}'s "
              f"{part['hbm_bytes_per_s'] / 1e12:g} TB/s: {traced['floor_ratio']}x; by the fit {split['fixed']} s per "
              f"step, {split['kv']} s per KV token read, {split['once']} s once (warm-up, stalls); "
              f"{traced['kv_read_tokens'] / traced['seconds'] / 1e6:.1f} M KV tokens read a second")
        print(f"fit over {fit['steps_fitted']:,} steps ({fit['decoding_fitted'][0]}-{fit['decoding_fitted'][1]} "
              f"sequences decoding; {fit['warmup_steps']} warm-up steps, {fit['warmup_seconds']} s, and "
              f"{fit['stall_steps']} stalls, {fit['stall_excess_s']} s over the fit, left out): step = "
              f"{1000 * fit['step_s']:.2f} ms + {1000 * fit['s_per_million_kv_tokens']:.1f} ms per million KV tokens "
              f"read ({fit['kv_read_tb_per_s']} TB/s; R^2 {fit['r2']}, residual SD {fit['residual_sd_ms']} ms)")
        print(f"errors over the traced steps: replay at the fit {100 * part['fit_error']:+.1f}%, first half's fit on "
              f"the second {100 * part['holdout_error']:+.1f}%; schedule: decoding off by "
              f"{part['schedule']['mean_abs_decoding_diff']} a step, KV reads x{part['schedule']['kv_read_ratio']}")
        whole = part["replayed"]
        print(f"{whole['label']}: the whole part {whole['seconds']} s (low {whole['seconds_low']} s: its "
              f"{whole['tail_steps']:,} steps of fewer sequences than traced at {1000 * MERGED_STEP_S} ms), "
              f"{whole['steps']:,} steps, "
              f"{whole['preemptions']} preemptions; floor {whole['eval_floor_s']} s ({whole['eval_floor_ratio']}x)"
              + (f"; measured {part['measured_s']} s ({100 * part['whole_fit_error']:+.1f}%)" if part["complete"] else ""))
        for p in figures["projections"]:
            print(f"PROJECTION: {p['requests']} samples ({p['length_model']['name']}, mean {p['mean_tokens']}, "
                  f"{p['at_cap']} at the cap), KV cache {p['kv_capacity_tokens']:,} tokens: {p['seconds']} s = "
                  f"{p['seconds'] / 60:.1f} min (low {p['seconds_low'] / 60:.1f} min), floor {p['eval_floor_s']} s "
                  f"({p['eval_floor_ratio']}x), {p['preemptions']} preemptions")
        if args.out:
            args.out.write_text(json.dumps({"record": args.record.name, **figures}, indent=1) + "\n")
        return
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
