"""The AIME-sized eval's engine steps, timed (bench_cycle.py part 2): where its minutes go.

An eval at thinking lengths spends its last minutes on a few long samples. Whether a step then costs what
its KV bytes cost, or a fixed latency the bytes do not set, decides the lever (an FP8 KV cache, another
attention kernel, merged weights, other work beside the tail), so every engine step is timed with the
requests still in the engine. `python3 -m benchmarks.eval_trace RECORD.json` plots a record's timeline.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import statistics
import sys
import time
from pathlib import Path

# steps grouped by the sequences decoding in them: the crowded start down to the last few samples
SEQUENCE_BANDS = ((1, 4), (5, 16), (17, 64), (65, None))
TIMELINE_POINTS = 600


class TimeLimit(Exception):
    """A timed eval ran past its limit (bench_cycle.py --time-limit): what was traced is kept."""


class TimedSteps:
    """A running vLLM LLMEngine whose step() calls are timed. The evaluator's VLLMEngine drives it as it
    drives the trainer's engine (attached); every other call goes to the engine itself.

    With trace=True every step's seconds, sequences decoding and the KV tokens they read are kept (`trace`),
    read from the step's outputs: the evaluator's requests return one output a step for every request that
    decoded a token (vLLM's default cumulative outputs), holding its prompt and every token so far, i.e. the
    context that token read. Counted after the step's clock stops. `limit_s`: raise TimeLimit at the first
    step past that many seconds after the first; `progress(self)`: called every `every_s` seconds."""

    def __init__(self, engine, trace: bool = False, limit_s: float | None = None, progress=None,
                 every_s: float = 30.0):
        self.engine = engine
        # (end since the first step, seconds, in engine, finished, decoding)
        self.steps: list[tuple[float, float, int, int, int]] = []
        self.trace = {"seconds": [], "decoding": [], "kv_tokens": []} if trace else None
        self.limit_s, self.progress, self.every_s = limit_s, progress, every_s
        self._first: float | None = None
        self._reported = 0.0

    def step(self):
        in_engine = self.engine.get_num_unfinished_requests()
        began = time.monotonic()
        self._first = began if self._first is None else self._first
        if self.limit_s is not None and began - self._first > self.limit_s:
            raise TimeLimit(f"{began - self._first:.0f} s of steps: past the limit of {self.limit_s:.0f} s")
        outputs = self.engine.step()
        ended = time.monotonic()
        self.steps.append((ended - self._first, ended - began, in_engine, sum(o.finished for o in outputs),
                           len(outputs)))
        if self.trace is not None:
            self.trace["seconds"].append(round(ended - began, 6))
            self.trace["decoding"].append(len(outputs))
            self.trace["kv_tokens"].append(sum(len(o.prompt_token_ids or ()) + len(o.outputs[0].token_ids)
                                               for o in outputs))
        if self.progress is not None and ended - self._first - self._reported >= self.every_s:
            self._reported = ended - self._first
            self.progress(self)
        return outputs

    def __getattr__(self, name):  # add_request, has_unfinished_requests, remove_lora
        return getattr(self.engine, name)


@contextlib.contextmanager
def engine_args_with(**extra):
    """Engines started inside get the evaluator's own EngineArgs with `extra` in place (e.g. attention_backend,
    max_loras): one setting changed for a measurement, the rest the evaluator's, with no second copy of its
    arguments. `extra` wins over what the evaluator passes (a functools.partial would lose to it)."""
    import vllm

    original = vllm.EngineArgs
    vllm.EngineArgs = lambda *args, **kwargs: original(*args, **(kwargs | extra))
    try:
        yield
    finally:
        vllm.EngineArgs = original


def summarize_steps(steps: list[tuple], max_num_seqs: int) -> dict:
    """The steps by sequences decoding (a step's outputs where recorded, the 5th field; else the requests in
    the engine, at most max_num_seqs, which counts preempted and waiting ones too): how many, their seconds
    and median step; when each share of the samples was done; a timeline of at most TIMELINE_POINTS windows
    (end s, mean step ms, mean sequences) for the plot."""
    decoding = [step[4] if len(step) > 4 else min(step[2], max_num_seqs) for step in steps]
    bands = []
    for low, high in SEQUENCE_BANDS:
        chosen = [step[1] for step, d in zip(steps, decoding) if d >= low and (high is None or d <= high)]
        if chosen:
            bands.append({"sequences": f"{low}-{high or max_num_seqs}", "steps": len(chosen),
                          "seconds": round(sum(chosen), 1), "median_step_ms": round(1000 * statistics.median(chosen), 2)})
    finished_at = [step[0] for step in steps for _ in range(step[3])]
    done_by = {f"{share:.0%}": round(finished_at[max(math.ceil(share * len(finished_at)) - 1, 0)], 1)
               for share in (0.5, 0.9, 0.95, 0.99, 1.0)} if finished_at else {}
    width = max(math.ceil(len(steps) / TIMELINE_POINTS), 1)
    timeline = [[round(steps[min(i + width, len(steps)) - 1][0], 2),
                 round(1000 * statistics.mean(step[1] for step in steps[i:i + width]), 2),
                 round(statistics.mean(decoding[i:i + width]), 1)] for i in range(0, len(steps), width)]
    return {"steps": len(steps), "step_seconds": round(sum(step[1] for step in steps), 1),
            "bands_by": "outputs (sequences decoding)" if steps and len(steps[0]) > 4 else "requests in the engine",
            "by_sequences": bands, "done_by_s": done_by, "timeline": timeline}


def plot(record: dict, path: Path) -> Path:
    """Sequences decoding and the mean step time over the eval, one panel each, on one time axis."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    trace = record["engine_steps"]
    ends, step_ms, sequences = zip(*trace["timeline"])
    figure, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(8, 5.5))
    top.plot(ends, sequences, color="#2166ac")
    top.set_ylabel("sequences decoding\n(requests, <= max_num_seqs)")
    top.set_ylim(bottom=0)
    bottom.plot(ends, step_ms, color="#b2182b")
    bottom.set_ylabel("engine step, ms (window mean)")
    bottom.set_ylim(bottom=0)
    bottom.set_xlabel("seconds since the first step")
    if "95%" in trace["done_by_s"]:  # what is right of this line is the tail: the last 5% of the samples
        for axis in (top, bottom):
            axis.axvline(trace["done_by_s"]["95%"], color="#777777", linestyle=":", linewidth=1,
                         label="95% of the samples done")
        top.legend(loc="upper right", fontsize=8)
    # two lines: a probe's adapter label is long enough to run off a one-line title
    top.set_title(f"AIME24-sized eval, {record['requests']} samples in {record['generation_s']} s: KV cache "
                  f"{record.get('kv_cache_dtype', 'auto')}, attention {record.get('attention_backend', 'vLLM default')},"
                  f"\nadapter {record.get('adapter', 'LoRARequest')}", fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description="Plot an AIME-sized eval record's engine-step timeline.")
    parser.add_argument("record", type=Path, help="aime_sized_eval_*.json written by bench_cycle.py with a step trace")
    parser.add_argument("--out", type=Path, default=None, help="the PNG (default: next to the record)")
    args = parser.parse_args(argv)
    import json

    record = json.loads(args.record.read_text())
    if "engine_steps" not in record:
        sys.exit(f"{args.record} has no engine_steps: it was recorded before bench_cycle.py timed the engine's "
                 "steps; rerun `bench_cycle.py --eval-only` for a record with them")
    print(plot(record, args.out or args.record.with_suffix(".png")))


if __name__ == "__main__":
    main()
