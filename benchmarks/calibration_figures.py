"""The figures tests/summarize/test_calibration.py puts bands on, printed (same seeds, same draws).

    PYTHONPATH=. .venv/bin/python benchmarks/calibration_figures.py   # ~15 s
"""

from __future__ import annotations

from tests.summarize import test_calibration as calibration


def main() -> None:
    for pool_sd in (False, True):
        f = calibration.power_at_advised_seeds(pool_sd)
        print(f"pool_sd={pool_sd}: true SD {f['sd']:.2f}, advised {f['seeds']} seeds for +3 -> detected "
              f"{f['detected']:.3f} (promise 0.80 +- 0.04), interval of delta covers {f['covered']:.3f}")
    print(f"interaction SD 0.6 logits, 6 seeds: interval of delta covers {calibration.interaction_coverage():.3f}")
    f = calibration.five_seed_advice()
    print(f"6 configs x 5 seeds: advice says 5 seeds give 80% for +3 in {f['own']:.3f} of sweeps with the config's "
          f"own SD, {f['pooled']:.4f} with the pooled SD; true power at 5 seeds {f['true_power']:.3f}")
    f = calibration.noise_split_at_5_seeds()
    print(f"noise split, 5 seeds, true training-seed SD {f['true_sd']:.2f}: exact 0 in {f['zero']:.3f}, below eval "
          f"noise in {f['below']:.3f}, interval covers {f['covered']:.3f}")


if __name__ == "__main__":
    main()
