"""The race report counts collapsed seeds per config from the run dirs its race.jsonl names."""

from __future__ import annotations

import json
from pathlib import Path

from omegaconf import OmegaConf

from opsd_sweep.summarize.races import read_race
from opsd_sweep.summarize.report import race_section
from opsd_sweep.config import load_run_config, to_dict
from opsd_sweep.race.log import RaceLog
from tests.summarize.test_races import HEADER, decision, run
from tests.conftest import compose


def run_dir_with_kl(path, kl: list[float]) -> str:
    """A run dir as a cycle leaves it: its config (the default collapse rule) and a metrics line per step."""
    (path / "train").mkdir(parents=True)
    (path / "config.yaml").write_text(OmegaConf.to_yaml(OmegaConf.create(to_dict(load_run_config(compose())))))
    (path / "train/metrics.jsonl").write_text("".join(
        json.dumps({"step": i + 1, "kl_true": k, "rollout_len": 18.0, "rollout_cap_frac": 0.0}) + "\n"
        for i, k in enumerate(kl)))
    return str(path)


def test_the_race_report_says_how_many_seeds_of_each_config_collapsed_and_where(tmp_path):
    healthy = [1.2, 1.0, 0.6, 0.3, 0.1, 0.05, 0.05]
    dirs = {("a", 1): healthy, ("a", 2): healthy, ("b", 1): [1.2, 1.0, 0.9, 3.1, 3.5, 4.0, 3.0, 2.8],
            ("b", 2): healthy, ("b", 3): [1.2, 1.0, 0.8, 0.7, 2.6, 2.9, 2.5, 2.7, 3.0], ("b", 4): healthy[:3]}
    # b's seeds 1 and 3 leave the band (> 1.5 x 1.2) at 4 and 5, for the default rule's 5 steps
    log = RaceLog(tmp_path / "g" / "race.jsonl")
    log.append(HEADER)
    for (config, seed), kl in dirs.items():
        log.append(run(config, seed) | {"run_dir": run_dir_with_kl(tmp_path / f"{config}{seed}", kl)})
    log.append(decision(0, "a", 55.0, "continue"))
    section = "\n".join(race_section(read_race(log.path), None))
    assert "- a: no collapse in 2 seeds" in section
    # b's seed 4 stopped at step 3, before the rule (2 early steps + 5 in a row) could fire: not judged
    assert "- b: collapsed in 2 of 3 judged seeds, at steps 4, 5; 1 not judged (stopped before step 7, where " \
        "the rule can first fire)" in section


def test_a_run_whose_config_names_no_usable_rule_is_not_judged_and_says_why():
    from opsd_sweep.summarize.collapses import collapse_columns

    from opsd_sweep.run.record import RunRecord
    from opsd_sweep.run.rundir import RunDir

    record = RunRecord(RunDir(Path("/nowhere")), {"train": {"collapse": {"kl_ratio": "high"}}}, {"state": "done"},
                       [{"step": 1, "kl_true": 1.0}], None, None)
    judged = collapse_columns(record.collapse)
    assert judged["collapse_step"] != judged["collapse_step"] and not judged["collapse_judged"]  # NaN: not flagged
    assert judged["collapse_reason"].startswith("no usable train.collapse in config.yaml")
