"""Simulated sweeps that check what the statistics promise (interval coverage, power), vectorised.

Noise model, in logits: run r of config c solves problem i with probability
    sigmoid(mu_c - d_i + g_ci + u_r),
d_i ~ N(0, difficulty_sd) the problem's difficulty, g_ci ~ N(0, interaction_sd) a config x problem
interaction (a config that helps some problems and hurts others), u_r ~ N(0, seed_sd) the
training-seed effect of the run; each problem gets K Bernoulli samples (eval sampling).

A `Benchmark` fixes d and g once, as a real benchmark fixes its problems. The true score of a config
is then 100 x mean_i E_u[sigmoid(...)] over these problems: the target of every interval and test
(see inference.stats). Expectations over u use Gauss-Hermite quadrature. Used by tests/summarize and
benchmarks/bench_stats.py; opsd_sweep.simulate writes run dirs, this draws score arrays only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_NODES, _WEIGHTS = np.polynomial.hermite_e.hermegauss(40)  # E[f(Z)], Z ~ N(0, 1) = sum w f(x) / sqrt(2 pi)
_WEIGHTS = _WEIGHTS / _WEIGHTS.sum()


@dataclass(frozen=True)
class NoiseModel:
    """The simulation's settings; every value is given by the caller (tests, benchmark)."""

    n_problems: int
    n_samples: int  # K samples per problem
    difficulty_sd: float  # logits
    seed_sd: float  # logits: the training-seed effect
    interaction_sd: float  # logits: config x problem interaction (0 = a config shifts every problem alike)


@dataclass(frozen=True)
class Benchmark:
    """Fixed problems: difficulties d (n_problems,), interactions g (configs, n_problems), config logits mu."""

    model: NoiseModel
    difficulty: np.ndarray
    interaction: np.ndarray
    mu: np.ndarray

    def _rates(self, u: np.ndarray) -> np.ndarray:
        """Solve rates (configs, len(u), problems) for run effects u."""
        logit = self.mu[:, None, None] - self.difficulty + self.interaction[:, None, :] + u[None, :, None]
        return 1.0 / (1.0 + np.exp(-logit))

    def true_scores(self) -> np.ndarray:
        """shape (configs,): expected score (percent) of a run of each config on these problems."""
        return 100.0 * (self._rates(self.model.seed_sd * _NODES).mean(-1) @ _WEIGHTS)

    def variances(self) -> tuple[np.ndarray, np.ndarray]:
        """(training-seed, eval-sampling) variance of a run score (points^2), each shape (configs,)."""
        rates = self._rates(self.model.seed_sd * _NODES)
        score = 100.0 * rates.mean(-1)
        seed_var = (score**2) @ _WEIGHTS - (score @ _WEIGHTS) ** 2
        eval_var = (1e4 * (rates * (1 - rates)).mean(-1) / (self.model.n_samples * self.model.n_problems)) @ _WEIGHTS
        return seed_var, eval_var

    def run_sd(self) -> np.ndarray:
        """shape (configs,): true run-to-run SD (points) of a config: training seed and eval sampling."""
        return np.sqrt(sum(self.variances()))

    def draw(self, n_sweeps: int, n_runs: int, rng: np.random.Generator) -> np.ndarray:
        """Correct-sample counts, shape (n_sweeps, configs, n_runs, problems): n_runs runs per config."""
        u = rng.normal(0.0, self.model.seed_sd, (n_sweeps, self.mu.size, n_runs))
        logit = (self.mu[None, :, None, None] - self.difficulty + self.interaction[None, :, None, :]
                 + u[..., None])
        return rng.binomial(self.model.n_samples, 1.0 / (1.0 + np.exp(-logit)))


def benchmark(model: NoiseModel, effects: np.ndarray, base_score: float, rng: np.random.Generator) -> Benchmark:
    """Draw fixed problems and set each config's logit so that its true score is base_score + effects[c].

    Config 0 is meant as the baseline (effect 0). The logits are found by bisection: the true score
    rises monotonically with mu.
    """
    effects = np.asarray(effects, dtype=float)
    difficulty = rng.normal(0.0, model.difficulty_sd, model.n_problems)
    interaction = rng.normal(0.0, model.interaction_sd, (effects.size, model.n_problems))
    low, high = np.full(effects.size, -12.0), np.full(effects.size, 12.0)
    for _ in range(60):
        mid = (low + high) / 2
        above = Benchmark(model, difficulty, interaction, mid).true_scores() > base_score + effects
        low, high = np.where(above, low, mid), np.where(above, mid, high)
    return Benchmark(model, difficulty, interaction, (low + high) / 2)


def run_scores(counts: np.ndarray, n_samples: int) -> np.ndarray:
    """Run scores (percent), shape counts.shape[:-1]: avg@K of each run."""
    return 100.0 * counts.mean(-1) / n_samples


@dataclass(frozen=True)
class CheckpointModel:
    """Every checkpoint of a few runs of one config, with the same true score at every step (nothing to
    find, so any score above the truth is selection bias) unless `profile` adds points per step. In
    points, on the probability scale: run r at step s solves problem i with probability
    p_i + (profile_s + u_r + v_rs) / 100, p_i ~ U(0.15, 0.85) drawn once per replicate, u_r ~ N(0, run_sd)
    the run's training-seed effect, v_rs ~ N(0, step_sd) its step-to-step training noise; K Bernoulli
    samples per problem. The true score of a run at step s is 100 mean_i p_i + profile_s (the shifts
    stay > 4 SD inside [0, 1], where no clipping changes the mean, for profiles within +-5 points)."""

    runs: int
    steps: int
    n_problems: int
    n_samples: int  # K, even: the split-half choice uses the even and the odd samples
    run_sd: float  # points
    step_sd: float  # points
    profile: tuple[float, ...] = ()  # points added to every problem at each step; () = none

    def rates(self, replicates: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """(rates, truth): solve probabilities, shape (replicates, runs, steps, problems), and the true score
        (percent) of each replicate without the profile, shape (replicates,)."""
        easy = rng.uniform(0.15, 0.85, (replicates, 1, 1, self.n_problems))
        u = rng.normal(0.0, self.run_sd, (replicates, self.runs, 1, 1))
        v = rng.normal(0.0, self.step_sd, (replicates, self.runs, self.steps, 1))
        shift = np.asarray(self.profile or [0.0] * self.steps, dtype=float)[:, None]
        return np.clip(easy + (shift + u + v) / 100, 0.0, 1.0), 100.0 * easy.mean(axis=(1, 2, 3))

    def draw(self, replicates: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(even, odd, truth): correct counts among each problem's even / odd samples, each shape
        (replicates, runs, steps, problems), and the true score (percent) of each replicate, (replicates,)."""
        rates, truth = self.rates(replicates, rng)
        half = self.n_samples // 2
        return rng.binomial(half, rates), rng.binomial(half, rates), truth
