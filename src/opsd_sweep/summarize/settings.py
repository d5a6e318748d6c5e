"""Typed settings of the summary (defaults in conf/summary.yaml) and the loading of the published anchor
(conf/anchor/; its type is inference.arms.Anchor)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from omegaconf import MISSING, OmegaConf

from opsd_sweep import CONF_DIR, settings_from_conf
from opsd_sweep.config import collapsed_score_problems
from opsd_sweep.inference import stats
from opsd_sweep.inference.arms import Anchor
from opsd_sweep.inference.pairing import PAIRINGS  # how a config meets the baseline: independent arms or by seed

# Kinds of runs the pooled SD leaves out unless opted in (pool_include): other labs' results (another
# pipeline, another spread), the simulator's runs next to real ones, and the untrained base model (its runs
# differ in eval sampling only, so they would shrink the SD a trained config is planned with).
POOL_OPT_INS = ("external", "simulated", "base_model", "collapsed")


@dataclass
class SummarySettings:
    roots: list[str] = MISSING
    out: Optional[str] = MISSING
    external: list[str] = field(default_factory=lambda: MISSING)
    metric: str = MISSING
    level: float = MISSING
    alpha: float = MISSING
    anchor: Optional[str] = MISSING
    baseline: Optional[str] = MISSING
    pool_sd: bool = MISSING
    pool_anchor: bool = MISSING
    pool_include: list[str] = field(default_factory=lambda: MISSING)
    assumed_sd: Optional[float] = MISSING
    target_effect: float = MISSING
    power: float = MISSING
    larger_k: int = MISSING
    collapsed_score: Optional[float] = MISSING
    pairing: str = MISSING
    transition_threshold: float = MISSING
    plots: bool = MISSING


def load_settings(overrides: dict) -> SummarySettings:
    """conf/summary.yaml merged with the given (non-None) overrides, type-checked and validated."""
    settings: SummarySettings = settings_from_conf(SummarySettings, "summary.yaml", overrides)
    problems = []
    if not 0 < settings.level < 1:
        problems.append(f"level={settings.level} must be in (0, 1), e.g. 0.95")
    if not 0 < settings.alpha < 1:
        problems.append(f"alpha={settings.alpha} must be in (0, 1), e.g. 0.05")
    if not 0 < settings.power < 1:
        problems.append(f"power={settings.power} must be in (0, 1), e.g. 0.8")
    if settings.target_effect <= 0:
        problems.append(f"target_effect={settings.target_effect} must be > 0 (points), e.g. 2")
    if settings.assumed_sd is not None and settings.assumed_sd <= 0:
        problems.append(f"assumed_sd={settings.assumed_sd} must be > 0 (points), e.g. 3.5, or null (none declared)")
    if unknown := [kind for kind in settings.pool_include if kind not in POOL_OPT_INS]:
        problems.append(f"pool_include={unknown} is not among {list(POOL_OPT_INS)}, e.g. [external]")
    bounds = stats.SCORE_BOUNDS if stats.is_percent_score(settings.metric) else None
    problems.extend(collapsed_score_problems("collapsed_score", settings.collapsed_score,
                                             f"{settings.metric} (a percentage)", bounds))
    if settings.larger_k < 2:
        problems.append(f"larger_k={settings.larger_k} must be >= 2 samples per problem, e.g. 64")
    if settings.pairing not in PAIRINGS:
        problems.append(f"pairing={settings.pairing!r} must be one of {list(PAIRINGS)}: seed compares each config "
                        "with the in-sweep baseline by paired differences over the seeds both ran; declare it "
                        "before looking at the scores")
    if not 0 < settings.transition_threshold <= 1:
        problems.append(f"transition_threshold={settings.transition_threshold} must be in (0, 1] (a per-problem "
                        "solve rate), e.g. 0.5")
    if problems:
        raise ValueError("invalid summary settings (conf/summary.yaml or CLI flags):\n  - " + "\n  - ".join(problems))
    return settings


AUTO = "auto"


def load_anchor(name: Optional[str], configured: list[dict] = ()) -> Optional[Anchor]:
    """The anchor named in conf/anchor/ (or a YAML path); None when name is None or 'none'.

    'auto' is the anchor the runs were configured with (`configured`: their distinct `anchor`
    sections), so a tiny-profile sweep is compared with the tiny anchor, not with the paper's.
    """
    if name is None or name.lower() == "none":
        return None
    if name == AUTO:
        if len(configured) > 1:
            labels = sorted(str(a.get("label")) for a in configured)
            raise ValueError(f"anchor auto: the runs were configured with {len(configured)} different anchors "
                             f"{labels}; summarise one kind of run per call, or pick one with --anchor NAME "
                             f"(or --anchor none)")
        return Anchor.of(configured[0]) if configured else None
    path = Path(name) if name.endswith((".yaml", ".yml")) else CONF_DIR / "anchor" / f"{name}.yaml"
    if not path.exists():
        known = sorted(p.stem for p in (CONF_DIR / "anchor").glob("*.yaml"))
        raise ValueError(f"anchor {name!r}: {path} not found; use one of {known}, auto, a YAML path, or none")
    return Anchor.of(OmegaConf.to_container(OmegaConf.load(path)))
