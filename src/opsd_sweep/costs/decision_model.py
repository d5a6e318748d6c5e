"""The decision-cost benchmarks' world: what a run costs (GPU-seconds) and what it scores (per-problem solve rates).

Cost model (one GPU of a kind in costs.measured; the H200's by default; every figure measured or named):
- training: 100 steps x 5.24 s (the steady step of `make gpu-check` on f2ccf53, BENCHMARKS.md) = 524 s a run;
- eval: the step model fitted to the traced real-length eval (benchmarks/measured/
  eval_step_model_2026-12-04_published_part.json): an engine step costs a + b x (KV tokens read that step),
  a = 5.56 ms, b = 27.0 ms per million tokens. At C ~ 64 sequences decoding together, a sample of n tokens after
  a prompt of P takes part in n steps: it pays a / C of each (the step's fixed part shared by the C sequences)
  and reads its own context of P + t tokens at its t-th token, so it costs
      c(n) = n a / C + b (P n + n (n + 1) / 2) seconds,
  quadratic in n: the longest (wrong, capped) samples are the dearest. 360 samples at the published lengths
  come to ~46 GPU-minutes (bench_decision_cost.check_published_eval), inside the step model's projection of 44-49 for the same
  eval (its replay, with the KV cache's preemptions, 2,631-2,938 s). A small eval (K = 2-4) keeps ~64 sequences
  only while more than 64 are left: its tail runs emptier steps; the model leaves that out (a sweep can share
  one engine between runs' evals, benchmarks/bench_shared_tail.py).

Length model tied to correctness (the `published` preset of length_model.py gives the overall figures, mean
19,000 tokens after the 38,912 cap and 5% at the cap, but no split): correct samples lognormal of mean 14,000
(sigma 0.40, so ~0.3% reach the cap), wrong ones a capped lognormal whose mean after the cap and share at the
cap make the whole match the preset at the anchor's 54.22% accuracy (wrong: mean ~24,900, ~10.8% at the cap).
OPSD and thinking-model papers report wrong answers ~1.5-2x longer than right ones; we take 1.8x.
Trained checkpoints write longer samples than the base model (length_model.TRAINED_GROWTH): `published_by_correctness(
trained=True)` stretches both by it. A sweep's own lengths (length_model.sweep) replace the lognormals with the
recorded correct and wrong lengths (`sweep_by_correctness`).

Difficulty model (opsd_sweep.simulate's logistic model, with problems at 0 and 1): 6 problems never solved and
4 always solved by any run (solve rate exactly 0 or 1), 20 with logistic difficulties of SD 2.0 (problem_seed 0);
a run's score moves the 20 only. At the anchor's 54.22%: pass@12 78% (AIME24 on a 1.7B model: ~77%) and the
eval-sampling SD of avg@12 1.73 points (published: ~1.5-2.2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cached_property
from statistics import NormalDist
from types import SimpleNamespace

import numpy as np

from opsd_sweep.costs import length_model
from opsd_sweep.costs.measured import GPU_COSTS, WEIGHT_BYTES, GpuCosts
from opsd_sweep.simulate import problem_difficulties, solve_rates

TRAIN_STEPS = 100  # the recipe's (conf/recipe/paper.yaml)
PROMPT_TOKENS = 100  # an AIME prompt, as the eval benchmarks force it (bench_vllm_tp_dp)
ANCHOR_SCORE = 54.22  # the published avg@12 (percent)
SAMPLES_CAP = 64  # most samples of one problem a run may draw (the allocation never asked more than ~20)


# --- cost ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CostModel:
    """GPU-seconds of a run: training, plus c(n) per eval sample of n tokens (module docstring)."""

    train_s: float
    step_s: float  # a: an engine step's fixed part
    kv_s_per_token: float  # b: seconds per KV token read
    concurrency: int
    prompt_tokens: int
    gpu: GpuCosts = GPU_COSTS["H200"]

    def sample_seconds(self, n) -> np.ndarray:
        n = np.asarray(n, float)
        return n * self.step_s / self.concurrency + self.kv_s_per_token * (self.prompt_tokens * n + n * (n + 1) / 2)

    def expected_sample_seconds(self, mean: float, second_moment: float) -> float:
        """E[c(n)] from E[n] and E[n^2] (c is quadratic in n)."""
        linear = self.step_s / self.concurrency + self.kv_s_per_token * (self.prompt_tokens + 0.5)
        return mean * linear + self.kv_s_per_token * second_moment / 2

    def describe(self) -> dict:
        step = self.train_s / TRAIN_STEPS
        source = self.gpu.train_source if step == self.gpu.train_step_s else (
            self.gpu.train_floor_source if step == self.gpu.train_step_floor_s else "a what-if")
        return {"gpu": self.gpu.kind, "train_s": self.train_s, "train_source": f"steps x {step:g} s ({source})",
                "eval_step_s": self.step_s,
                "eval_s_per_million_kv_tokens": self.kv_s_per_token * 1e6, "concurrency": self.concurrency,
                "prompt_tokens": self.prompt_tokens, "sample_seconds": "n a / C + b (P n + n (n + 1) / 2)",
                "eval_source": self.gpu.eval_source}


def measured_cost_model(train_s: float | None = None, kv_factor: float = 1.0, gpu: str = "H200") -> CostModel:
    """The cost model of the measured figures of one GPU kind (costs.measured); train_s: a run's training
    GPU-seconds (default the recipe's 100 steps); kv_factor scales the KV part (0.5: an FP8 KV cache reads half)."""
    if gpu not in GPU_COSTS:
        raise ValueError(f"gpu={gpu!r}: no measured costs for it; give one of {sorted(GPU_COSTS)} "
                         "(src/opsd_sweep/costs/measured.py)")
    g = GPU_COSTS[gpu]
    return CostModel(TRAIN_STEPS * g.train_step_s if train_s is None else train_s, g.eval_step_s,
                     g.eval_s_per_million_kv_tokens / 1e6 * kv_factor, g.concurrency, PROMPT_TOKENS, g)


def floor_cost_model(gpu: str = "H200") -> CostModel:
    """A run's cost with every part at its floor on that GPU, the samples unchanged: the training step at its
    projected floor, an engine step's fixed part at the time it takes to read the weights once, its KV part as
    measured (its fit already reads at the copy rate). What no exact engine can go below."""
    measured = measured_cost_model(gpu=gpu)
    g = measured.gpu
    return replace(measured, train_s=TRAIN_STEPS * g.train_step_floor_s,
                   step_s=WEIGHT_BYTES / length_model.COPY_BYTES_PER_S[gpu])


# --- lengths -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CappedLognormal:
    """min(X, cap) for X lognormal with this mean (before the cap) and sigma."""

    mean_before_cap: float
    sigma: float
    cap: int = length_model.CAP

    @property
    def mu(self) -> float:
        return math.log(self.mean_before_cap) - self.sigma ** 2 / 2

    def moment(self, k: int) -> float:
        """E[min(X, cap)^k], from the lognormal's partial moment E[X^k; X < cap] = e^(k mu + k^2 s^2 / 2)
        Phi((ln cap - mu - k s^2) / s)."""
        z = (math.log(self.cap) - self.mu) / self.sigma
        below = math.exp(k * self.mu + k * k * self.sigma ** 2 / 2) * NormalDist().cdf(z - k * self.sigma)
        return below + self.cap ** k * self.share_at_cap

    @property
    def share_at_cap(self) -> float:
        return 1 - NormalDist().cdf((math.log(self.cap) - self.mu) / self.sigma)

    def draw(self, rng: np.random.Generator, size) -> np.ndarray:
        return np.clip(np.rint(rng.lognormal(self.mu, self.sigma, size)), length_model.MIN_TOKENS, self.cap)


@dataclass(frozen=True)
class Recorded:
    """Lengths a sweep's samples had (one group: its correct, or its wrong ones), drawn back with replacement."""

    lengths: tuple[int, ...]
    cap: int = length_model.CAP

    def moment(self, k: int) -> float:
        return float(np.mean(np.asarray(self.lengths, float) ** k))

    @property
    def share_at_cap(self) -> float:
        return float(np.mean(np.asarray(self.lengths) >= self.cap))

    def draw(self, rng: np.random.Generator, size) -> np.ndarray:
        return rng.choice(np.asarray(self.lengths, float), size)


@dataclass(frozen=True)
class LengthsByCorrectness:
    """Sample lengths that depend on whether the sample is right (module docstring)."""

    correct: CappedLognormal | Recorded
    wrong: CappedLognormal | Recorded
    accuracy: float  # the accuracy the overall figures were matched at (a sweep's: its share correct)
    name: str = "published, split by correctness"

    def describe(self) -> dict:
        both = self.accuracy * self.correct.moment(1) + (1 - self.accuracy) * self.wrong.moment(1)

        def group(d) -> dict:
            return {"mean": round(d.moment(1)), "share_at_cap": round(d.share_at_cap, 4),
                    **({"sigma": round(d.sigma, 4)} if isinstance(d, CappedLognormal) else {"samples": len(d.lengths)})}
        return {"name": self.name, "matched_at_accuracy": round(self.accuracy, 4), "correct": group(self.correct),
                "wrong": group(self.wrong), "overall_mean": round(both), "overall_share_at_cap": round(
                    self.accuracy * self.correct.share_at_cap + (1 - self.accuracy) * self.wrong.share_at_cap, 4),
                "published_preset": {"mean": length_model.PUBLISHED_MEAN, "share_at_cap": length_model.PUBLISHED_AT_CAP}}


def published_by_correctness(correct_mean: float = 14_000, correct_sigma: float = 0.40,
                             accuracy: float = ANCHOR_SCORE / 100, trained: bool = False) -> LengthsByCorrectness:
    """Correct samples as given; wrong ones chosen so the mixture has the published preset's mean and share at the
    cap at this accuracy. trained: both stretched by length_model.TRAINED_GROWTH (before the cap), as a trained
    checkpoint's samples are longer than the base model's."""
    correct = CappedLognormal(correct_mean, correct_sigma)
    wrong_mean = (length_model.PUBLISHED_MEAN - accuracy * correct.moment(1)) / (1 - accuracy)
    wrong_at_cap = (length_model.PUBLISHED_AT_CAP - accuracy * correct.share_at_cap) / (1 - accuracy)
    before_cap, sigma = length_model.capped_lognormal(wrong_mean, wrong_at_cap)
    wrong = CappedLognormal(before_cap, sigma)
    if not trained:
        return LengthsByCorrectness(correct, wrong, accuracy)
    g = length_model.TRAINED_GROWTH
    return LengthsByCorrectness(CappedLognormal(correct.mean_before_cap * g, correct.sigma),
                                CappedLognormal(wrong.mean_before_cap * g, wrong.sigma), accuracy,
                                f"published x {g:.3f} trained-checkpoint growth, split by correctness")


def sweep_by_correctness(model: length_model.LengthModel) -> LengthsByCorrectness:
    """A sweep's own lengths (length_model.sweep), its correct and wrong samples apart, at its share correct."""
    rows = [row for _, problem in model.problems for row in problem]
    correct = tuple(n for n, ok, _ in rows if ok)
    wrong = tuple(n for n, ok, _ in rows if not ok)
    cap = model.parameters["cap"]
    # a group the sweep never wrote (every sample right, or every one wrong) is priced as the other group
    return LengthsByCorrectness(Recorded(correct or wrong, cap), Recorded(wrong or correct, cap),
                                len(correct) / len(rows), f"the sweep's own lengths ({model.parameters['source']}, "
                                f"{len(rows)} samples), split by correctness")


LENGTH_SPECS = "published|trained|sweep:RESULTS"


def eval_lengths(spec: str) -> LengthsByCorrectness:
    """The eval's length model by name: `published` (the base model's), `trained` (published x the trained-checkpoint
    growth) or `sweep:RESULTS` (the lengths the runs under RESULTS wrote)."""
    if spec == "published":
        return published_by_correctness()
    if spec == "trained":
        return published_by_correctness(trained=True)
    if spec.startswith("sweep:") and spec[len("sweep:"):]:
        return sweep_by_correctness(length_model.sweep(spec[len("sweep:"):]))
    raise ValueError(f"lengths {spec!r}: give {LENGTH_SPECS}")


# --- difficulty ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class DifficultyModel:
    """Per-problem difficulty logits: `never` problems at +inf (solve rate 0), `always` at -inf (rate 1), the rest
    opsd_sweep.simulate's N(0, sd) logits (problem_seed fixed)."""

    never: int = 6
    always: int = 4
    middle: int = 20
    sd: float = 2.0
    problem_seed: int = 0

    @cached_property
    def logits(self) -> np.ndarray:
        # problem_difficulties reads only these three fields of a SimulateConfig
        sim = SimpleNamespace(n_problems=self.middle, difficulty_sd=self.sd, problem_seed=self.problem_seed)
        return np.concatenate([np.full(self.always, -np.inf), problem_difficulties(sim), np.full(self.never, np.inf)])

    @property
    def problems(self) -> int:
        return self.never + self.always + self.middle

    def rates(self, run_scores) -> np.ndarray:
        """Solve rates [..., problems] whose mean is each run score / 100 (percent in)."""
        return solve_rates(np.asarray(run_scores, float), self.logits)

    def eval_var(self, score: float, k: int) -> float:
        """Eval-sampling variance (points^2) of avg@k of a run whose true score is `score`."""
        p = self.rates(np.array([score]))[0]
        return float((p * (1 - p) / k).sum() / p.size ** 2 * 1e4)

    def describe(self, score: float = ANCHOR_SCORE) -> dict:
        p = self.rates(np.array([score]))[0]
        return {"never_solved": self.never, "always_solved": self.always, "logistic_middle": self.middle,
                "middle_logit_sd": self.sd, "problem_seed": self.problem_seed, "at_score": score,
                "pass_at_12": round(float((1 - (1 - p) ** 12).mean()), 4),
                "eval_sd_avg_at_12": round(math.sqrt(self.eval_var(score, 12)), 3),
                "solve_rates": [round(float(x), 4) for x in p]}


# --- the world and its sweeps --------------------------------------------------------------------

@dataclass(frozen=True)
class World:
    """Everything a simulated run depends on. run_sd: the run-to-run SD (points) at K = 12, of which eval
    sampling is the difficulty model's; the rest is the training-seed effect."""

    difficulty: DifficultyModel
    lengths: LengthsByCorrectness
    cost: CostModel
    run_sd: float = 3.0
    base_score: float = ANCHOR_SCORE

    @property
    def train_sd(self) -> float:
        eval_var = self.difficulty.eval_var(self.base_score, 12)
        if eval_var >= self.run_sd ** 2:
            raise ValueError(f"run_sd={self.run_sd} is below the eval-sampling SD {math.sqrt(eval_var):.2f} of avg@12 "
                             "alone: give a larger run-to-run SD")
        return math.sqrt(self.run_sd ** 2 - eval_var)

    @cached_property
    def sample_seconds(self) -> tuple[float, float]:
        """Expected GPU-seconds of one (correct, wrong) sample."""
        return tuple(self.cost.expected_sample_seconds(d.moment(1), d.moment(2))
                     for d in (self.lengths.correct, self.lengths.wrong))

    def eval_seconds(self, correct: np.ndarray, samples: np.ndarray) -> float:
        """Expected eval GPU-seconds of a run's samples given which were right (lengths follow correctness)."""
        right, wrong = self.sample_seconds
        return float(np.sum(correct) * right + np.sum(np.asarray(samples) - correct) * wrong)

    def describe(self) -> dict:
        right, wrong = self.sample_seconds
        return {"cost_model": self.cost.describe() | {"seconds_per_correct_sample": round(right, 2),
                                                      "seconds_per_wrong_sample": round(wrong, 2)},
                "length_model": self.lengths.describe(), "difficulty_model": self.difficulty.describe(self.base_score),
                "run_sd_at_k12": self.run_sd, "train_seed_sd": round(self.train_sd, 3), "base_score": self.base_score}


def default_world(run_sd: float = 3.0, cost: CostModel | None = None,
                  lengths: LengthsByCorrectness | None = None) -> World:
    return World(DifficultyModel(), lengths or published_by_correctness(), cost or measured_cost_model(), run_sd)


class Sweep:
    """One simulated sweep: every run any design may ask for, with common random numbers, so that designs compared
    on the same sweep see the same training runs and the same eval draws.

    A run (config c, seed s) scores base + grid[c] + train_sd (sqrt(rho) z_s + sqrt(1 - rho) z_cs) points, z ~ N(0, 1):
    seed s's effect is shared by every config with correlation rho (paired seeds: common LoRA init, data order,
    rollout seeds). Its eval draws sample j of problem i as u_ij < p_i with u from a stream keyed by (sweep, c, s),
    so a run drawing 4 samples sees the first 4 of the 12 another design draws, whatever rho is.
    """

    def __init__(self, world: World, grid, seed: int, rho: float = 0.0, seeds: int = 128):
        if not 0 <= rho < 1:
            raise ValueError(f"rho={rho}: the seed correlation must be in [0, 1)")
        self.world, self.grid, self.seed = world, np.asarray(grid, float), seed
        rng = np.random.default_rng([seed, 0])
        shared, own = rng.normal(size=seeds), rng.normal(size=(self.grid.size, seeds))
        effect = world.train_sd * (math.sqrt(rho) * shared + math.sqrt(1 - rho) * own)
        self.true_scores = world.base_score + self.grid[:, None] + effect  # [configs, seeds]
        self.rates = world.difficulty.rates(self.true_scores)  # [configs, seeds, problems]

    def correct(self, config: int, seed: int, samples: np.ndarray) -> np.ndarray:
        """Correct counts per problem of run (config, seed) drawing samples[i] samples of problem i."""
        samples = np.asarray(samples, int)
        if samples.max() > SAMPLES_CAP or samples.min() < 1:
            raise ValueError(f"samples per problem {samples.min()}-{samples.max()}: must be in [1, {SAMPLES_CAP}]")
        u = np.random.default_rng([self.seed, 1, config, seed]).random((samples.size, SAMPLES_CAP))
        hits = np.cumsum(u < self.rates[config, seed][:, None], axis=1)
        return hits[np.arange(samples.size), samples - 1]

    def lengths(self, config: int, seed: int, correct: np.ndarray, samples: np.ndarray) -> list[np.ndarray]:
        """Token counts of a run's samples, problem by problem (correct ones first), drawn by correctness."""
        rng = np.random.default_rng([self.seed, 2, config, seed])
        lengths = self.world.lengths
        return [np.concatenate([lengths.correct.draw(rng, int(c)), lengths.wrong.draw(rng, int(n - c))])
                for c, n in zip(correct, samples)]
