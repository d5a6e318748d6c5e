"""How long the eval benchmarks' samples are: a documented input, not a constant (issue 39).

Random weights never emit EOS, so the GPU benchmarks force every sample to a length (min_tokens = max_tokens,
ignore_eos) and what an eval costs is set by those lengths. Three length models, chosen with
`--lengths published|short|sweep:RESULTS_DIR`:

- `published` (the default, the cycle's eval): thinking-mode AIME24 on Qwen3-1.7B, mean ~19,000 tokens a
  sample and ~5% at the 38,912-token cap, from two sources (PUBLISHED_SOURCES):
  1. an independent thinking-enabled OPSD reproduction, GitHub AryamaVMurthy/OPSD-thinking-research,
     `reproductions/05_results/`: mean output 17.6k-21.7k tokens per sample, 1-10% of samples at the 38,912
     cap, Qwen3-1.7B/4B, each 360-sample eval 72-90 minutes on their sharded set-up;
  2. the OPSD tuning workflow this product replaces: vLLM's own counters on one GPU's shard of the official
     eval, 84 requests in 13:19 at 2,191 output tok/s, i.e. ~20.8k tokens a sample.
  Drawn as a lognormal whose cap share is 5% and whose mean after the cap is 19,000 (sigma 0.495), each
  sample independently: the sources give no per-problem split.
- `short`: the lognormal of mean 5,000 (sigma 1, clipped to [64, 38,912]; mean 4,765 after the cap, 0.8% at
  it) that every eval figure before 2026-12-04 was measured at. A probe of the short eval only, never the
  cycle's eval: about a quarter of the real lengths.
- `sweep:PATH`: a real sweep's own token counts, read from the eval.json files under PATH (a results root,
  a group, a run dir or one eval.json): per problem, correct and wrong samples apart (n_tokens,
  finish_reason), so a user's measured distribution replaces ours. A draw of as many samples per problem as
  a problem has recorded gives them back as recorded; otherwise each problem's correct share is kept and
  its correct and wrong lengths are resampled apart (seeded).

Every record that draws lengths carries `length_model` (record_fields: name, parameters, drawn mean, share
at the cap) and `eval_length_mean_tokens`. kv_read_floor gives an eval's floor from the lengths actually
generated: every generated token reads its context's KV cache once (prompt + tokens so far), at
kv_bytes_per_token of the model's shape (layers x KV heads x head dim x 2 (K, V) x the KV dtype's bytes;
114,688 B = 115 KB for Qwen3-1.7B in bf16), over the GPU's measured device-to-device copy rate (hbm_bytes_per_s:
4.3 TB/s on the H200, 3.05 TB/s on the H100); `eval_floor_ratio` = time / floor.
"""

from __future__ import annotations

import json
import math
import random
import statistics
from dataclasses import dataclass, field
from pathlib import Path

CAP, MIN_TOKENS = 38_912, 64
# Each GPU's device-to-device copy rate (bytes read + written a second, measured on the device machines): the
# rate an eval's floor is at. H200: 4.3 TB/s (2026-10-28 and 2026-11-04); H100 80GB HBM3: 3.05 TB/s (2026-12-05).
COPY_BYTES_PER_S = {"H200": 4.3e12, "H100": 3.05e12}
HBM_BYTES_PER_S = COPY_BYTES_PER_S["H200"]  # the default: every record before 2026-12-05 is an H200's

PUBLISHED_SOURCES = (
    "GitHub AryamaVMurthy/OPSD-thinking-research, reproductions/05_results/ (an independent thinking-enabled OPSD "
    "reproduction, Qwen3-1.7B/4B on AIME): mean output 17.6k-21.7k tokens per sample, 1-10% at the 38,912 cap",
    "the OPSD tuning workflow this product replaces: vLLM's own counters on one GPU's shard of the official AIME "
    "eval, 84 requests in 13:19 at 2,191 output tok/s = ~20.8k tokens per sample",
)
PUBLISHED_MEAN, PUBLISHED_AT_CAP = 19_000, 0.05  # the target: mean after the cap, share at the cap
PUBLISHED_MEAN_BAND = (17_600, 21_700)  # the sources' range of mean lengths
# Trained checkpoints write longer samples than the base model: Qwen3-1.7B on AIME24, mean 17,575 tokens a sample at
# the base, 19,757 at step 100 (GitHub siyan-zhao/OPSD issue #15). KV reads grow with the square of the length, so a
# trained checkpoint's eval costs ~1.27x the base's (1.18x under the 38,912 cap, as decision_model prices it): a cost
# from the base-model lengths understates a sweep's.
TRAINED_BASE_MEAN, TRAINED_STEP100_MEAN = 17_575, 19_757
TRAINED_GROWTH = TRAINED_STEP100_MEAN / TRAINED_BASE_MEAN
TRAINED_SOURCE = ("GitHub siyan-zhao/OPSD issue #15: Qwen3-1.7B AIME24, mean 17,575 tokens a sample at the base, "
                  "19,757 at step 100")
SHORT_MEAN, SHORT_SIGMA = 5_000, 1.0


def lognormal_lengths(n: int, mean: float, sigma: float, seed: int, cap: int = CAP) -> list[int]:
    """n lengths from a lognormal of this mean (before the clip), rounded and clipped to [MIN_TOKENS, cap];
    drawn with numpy.random.default_rng(seed), as the benchmarks always drew them."""
    import numpy as np

    mu = math.log(mean) - sigma ** 2 / 2  # a lognormal's mean is exp(mu + sigma^2 / 2)
    draws = np.random.default_rng(seed).lognormal(mu, sigma, n)
    return [int(x) for x in np.clip(np.rint(draws), MIN_TOKENS, cap)]


def capped_lognormal(mean_after_cap: float, share_at_cap: float, cap: int = CAP) -> tuple[float, float]:
    """(mean before the cap, sigma) of the lognormal with P(X >= cap) = share_at_cap and E[min(X, cap)] =
    mean_after_cap, by bisection on sigma."""
    from statistics import NormalDist

    normal = NormalDist()
    z = normal.inv_cdf(1 - share_at_cap)

    def mean_after(sigma: float) -> float:
        mu = math.log(cap) - z * sigma
        return math.exp(mu + sigma ** 2 / 2) * normal.cdf(z - sigma) + cap * share_at_cap

    low, high = 1e-3, 3.0  # mean_after falls as sigma grows (the median falls faster than the tail adds)
    for _ in range(100):
        mid = (low + high) / 2
        low, high = (mid, high) if mean_after(mid) > mean_after_cap else (low, mid)
    sigma = (low + high) / 2
    return math.exp(math.log(cap) - z * sigma + sigma ** 2 / 2), sigma


@dataclass(frozen=True)
class LengthModel:
    """A named way to draw an eval's forced lengths, problem by problem."""
    name: str
    label: str
    parameters: dict
    problems: tuple = field(default=(), repr=False)  # sweep: per problem (id, [(n_tokens, correct, at_cap)])

    def draw(self, n_problems: int, n_samples: int, seed: int = 0) -> list[int]:
        """n_problems x n_samples lengths, problem-major (problem p's sample s at p * n_samples + s)."""
        if self.name == "sweep":
            return [x for p in range(n_problems) for x in self._problem(p, n_samples, seed)]
        if self.name == "short":
            return lognormal_lengths(n_problems * n_samples, SHORT_MEAN, SHORT_SIGMA, seed)
        return lognormal_lengths(n_problems * n_samples, self.parameters["mean_before_cap"],
                                 self.parameters["sigma"], seed, self.parameters["cap"])

    def _problem(self, p: int, n_samples: int, seed: int) -> list[int]:
        """The sweep's problem p (cycled when more problems are asked than it has): as recorded when the
        counts match, else its correct share kept and each group resampled apart."""
        pid, rows = self.problems[p % len(self.problems)]
        if len(rows) == n_samples:
            return [n for n, _, _ in rows]
        rng = random.Random(f"{seed}:{pid}:{p}")
        correct = [n for n, ok, _ in rows if ok]
        wrong = [n for n, ok, _ in rows if not ok]
        n_correct = round(n_samples * len(correct) / len(rows))
        picked = _resample(correct, n_correct, rng) + _resample(wrong, n_samples - n_correct, rng)
        rng.shuffle(picked)
        return picked

    def describe(self, drawn: list[int]) -> dict:
        """What a record says about its lengths: the model, its parameters, and the draw it made."""
        cap = self.parameters.get("cap", CAP)
        return {"name": self.name, "label": self.label, "parameters": self.parameters, "n": len(drawn),
                "drawn_mean": round(statistics.fmean(drawn), 1), "drawn_total": sum(drawn),
                "drawn_share_at_cap": round(sum(x >= cap for x in drawn) / len(drawn), 4)}


def _resample(pool: list[int], k: int, rng: random.Random) -> list[int]:
    """k of pool: without replacement while it lasts, then again from a fresh shuffle."""
    out: list[int] = []
    while len(out) < k:
        order = pool[:]
        rng.shuffle(order)
        out += order[:k - len(out)]
    return out


def published() -> LengthModel:
    mean_before_cap, sigma = capped_lognormal(PUBLISHED_MEAN, PUBLISHED_AT_CAP)
    return LengthModel("published", "thinking-mode AIME24 on Qwen3-1.7B as published (the cycle's eval)",
                       {"distribution": "lognormal, each sample independent, clipped to [64, cap]",
                        "mean_before_cap": round(mean_before_cap, 1), "sigma": round(sigma, 4), "cap": CAP,
                        "expected_mean": PUBLISHED_MEAN, "expected_share_at_cap": PUBLISHED_AT_CAP,
                        "sources": list(PUBLISHED_SOURCES)})


def short() -> LengthModel:
    return LengthModel("short", "SHORT PROBE: the pre-2026-12-04 lengths, ~1/4 of thinking-mode AIME (never the "
                       "cycle's eval)", {"distribution": "lognormal, clipped to [64, cap]", "mean_before_cap":
                                         SHORT_MEAN, "sigma": SHORT_SIGMA, "cap": CAP, "expected_mean": 4_765,
                                         "expected_share_at_cap": 0.008})


def eval_files(path: Path) -> list[Path]:
    """The eval.json files a sweep path holds (itself, if it is one)."""
    path = Path(path)
    return [path] if path.is_file() else sorted(path.rglob("eval.json"))


def sweep(path: Path) -> LengthModel:
    """The lengths a real sweep generated: every sample of every eval.json under `path`, by problem id."""
    files = eval_files(path)
    by_problem: dict[str, list[tuple[int, bool, bool]]] = {}
    caps = set()
    for file in files:
        record = json.loads(Path(file).read_text())
        caps.add(record.get("sampling", {}).get("max_tokens"))
        for problem in record.get("problems", []):
            rows = by_problem.setdefault(str(problem["id"]), [])
            rows += [(int(s["n_tokens"]), bool(s["correct"]), s["finish_reason"] == "length")
                     for s in problem["samples"]]
    if not by_problem:
        raise ValueError(f"sweep:{path}: no eval.json with samples under it (a results root, group, run dir "
                         "or eval.json with `problems` and their samples' n_tokens)")
    every = [row for rows in by_problem.values() for row in rows]
    correct = [n for n, ok, _ in every if ok]
    wrong = [n for n, ok, _ in every if not ok]

    def mean(xs):
        return round(statistics.fmean(xs), 1) if xs else None

    cap = max((c for c in caps if c), default=CAP)
    per_problem = [{"id": pid, "n_correct": sum(ok for _, ok, _ in rows), "n_wrong": sum(not ok for _, ok, _ in rows),
                    "mean_correct": mean([n for n, ok, _ in rows if ok]),
                    "mean_wrong": mean([n for n, ok, _ in rows if not ok]),
                    "at_cap": sum(c for _, _, c in rows)} for pid, rows in by_problem.items()]
    return LengthModel("sweep", f"a real sweep's generated lengths ({path})",
                       {"source": str(path), "eval_files": len(files), "problems": len(by_problem),
                        "samples": len(every), "cap": cap, "mean": mean([n for n, _, _ in every]),
                        "mean_correct": mean(correct), "mean_wrong": mean(wrong),
                        "share_correct": round(len(correct) / len(every), 4),
                        "share_at_cap": round(sum(c for _, _, c in every) / len(every), 4),
                        "per_problem": per_problem},
                       tuple((pid, tuple(rows)) for pid, rows in by_problem.items()))


def parse(spec: str) -> LengthModel:
    """`published`, `short` or `sweep:RESULTS_DIR` (the --lengths option)."""
    if spec == "published":
        return published()
    if spec == "short":
        return short()
    if spec.startswith("sweep:") and spec[len("sweep:"):]:
        return sweep(Path(spec[len("sweep:"):]))
    raise ValueError(f"--lengths {spec!r}: give published, short or sweep:RESULTS_DIR")


def add_argument(parser) -> None:
    """The benchmarks' --lengths option (default published)."""
    parser.add_argument("--lengths", default="published", metavar="published|short|sweep:RESULTS_DIR",
                        help="the forced lengths' model: published (thinking-mode AIME24 on Qwen3-1.7B, mean "
                             "~19k, ~5%% at the cap; the default), short (the old mean-5,000 lognormal: a probe, "
                             "never the cycle's eval) or sweep:RESULTS_DIR (a real sweep's eval.json token counts)")


def record_fields(model: LengthModel, drawn: list[int]) -> dict:
    """The two keys every record that draws lengths carries."""
    described = model.describe(drawn)
    return {"length_model": described, "eval_length_mean_tokens": described["drawn_mean"]}


def kv_bytes_per_token(config: dict | Path | str, kv_cache_dtype: str = "auto") -> int:
    """KV-cache bytes one token holds (and each decode step reads per token of context): layers x KV heads
    x head dim x 2 (K and V) x the KV dtype's bytes, from a model's config.json (a dict, the file or its dir)."""
    if not isinstance(config, dict):
        path = Path(config)
        config = json.loads((path / "config.json" if path.is_dir() else path).read_text())
    layers, kv_heads = config["num_hidden_layers"], config.get("num_key_value_heads", config["num_attention_heads"])
    head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    if kv_cache_dtype.startswith("fp8"):
        dtype_bytes = 1
    else:
        dtype = str(config.get("torch_dtype") or config.get("dtype") or "bfloat16")
        dtype_bytes = 4 if dtype in ("float32", "torch.float32") else 2
    return layers * kv_heads * head_dim * 2 * dtype_bytes


def kv_read_tokens(prompt_lens: list[int], lengths: list[int]) -> int:
    """Tokens of KV read over an eval: generated token t of a request with prompt P reads its context of
    P + t tokens (the prompt and every token so far, itself included), so a request reads
    L x P + L (L + 1) / 2. A preempted request's recompute is not counted: the floor is for the work asked."""
    return sum(n * p + n * (n + 1) // 2 for p, n in zip(prompt_lens, lengths))


def hbm_bytes_per_s(device: str | None) -> float:
    """The floor's rate on the GPU a record names ('NVIDIA H100 80GB HBM3' -> the H100's); a record that names
    no device is an H200's (every one before 2026-12-05)."""
    if device is None:
        return HBM_BYTES_PER_S
    for name, rate in COPY_BYTES_PER_S.items():
        if name in device:
            return rate
    raise ValueError(f"{device!r}: no copy rate is known for this GPU, so its KV-read floor cannot be computed; "
                     f"measure a device-to-device copy there and add it to opsd_sweep.costs.length_model.COPY_BYTES_PER_S")


def kv_read_floor(prompt_lens: list[int], lengths: list[int], bytes_per_token: int, seconds: float | None = None,
                  bandwidth: float = HBM_BYTES_PER_S) -> dict:
    """An eval's KV-read floor (every KV byte read once at the HBM's rate) and, given its time, time / floor."""
    tokens = kv_read_tokens(prompt_lens, lengths)
    floor = tokens * bytes_per_token / bandwidth
    return {"kv_bytes_per_token": bytes_per_token, "eval_kv_read_tokens": tokens,
            "eval_kv_read_bytes": tokens * bytes_per_token, "hbm_bytes_per_s": bandwidth,
            "eval_floor_s": round(floor, 1),
            **({"eval_floor_ratio": round(seconds / floor, 3)} if seconds is not None and floor > 0 else {})}
