"""The real conf/ composes and validates; bad values are caught with the key and the fix."""

from __future__ import annotations

import pytest

from opsd_sweep import CONF_DIR
from opsd_sweep.config import ConfigError, load_run_config
from opsd_sweep.run.keys import semantic_dict
from opsd_sweep.run.keys import run_key
from tests.conftest import compose


def group_options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))


@pytest.mark.parametrize("group", ["model", "data", "recipe", "loss", "eval", "anchor", "profile"])
def test_every_option_of_every_group_validates(group, tmp_path):
    for option in group_options(group):
        overrides = [f"{group}={option}"]
        if group in ("data", "eval") and option == "local":
            overrides.append(f"{group}.path={tmp_path / 'table.jsonl'}")
        if option.startswith("tiny"):  # the tiny world's tables live in its folder (tiny.dir)
            overrides.append("profile=tiny")
        run = load_run_config(compose(overrides))
        assert run.train.global_batch_size >= 1


def test_documented_sweep_knobs_are_top_level():
    run = load_run_config(compose(["learning_rate=1.4e-5", "seed=3", "clip=0.1", "loss_top_k=20"]))
    assert (run.learning_rate, run.seed, run.clip, run.loss_top_k) == (1.4e-5, 3, 0.1, 20)


def test_tiny_profile_selects_cpu_world():
    run = load_run_config(compose(["profile=tiny"]))
    assert run.train.num_gpus == 0 and run.tiny is not None
    assert run.model.path.endswith("/model") and run.model.path.startswith("/")


def test_errors_name_every_bad_value_and_the_fix():
    with pytest.raises(ConfigError) as err:
        load_run_config(compose(["learning_rate=-1", "loss.beta=2", "train.global_batch_size=31"]))
    message = str(err.value)
    assert "learning_rate=-1.0 must be > 0" in message
    assert "loss.beta=2.0 must be in [0, 1]" in message
    assert "train.global_batch_size=31 != GPUs 4 x per_device_batch_size 4 x grad_accum_steps 2 = 32" in message


def test_unknown_choice_lists_allowed_values():
    with pytest.raises(ConfigError, match=r"loss.clip_mode='clamp' is not one of \['none', 'elementwise', 'per_token'\]"):
        load_run_config(compose(["loss.clip_mode=clamp"]))


def test_run_key_is_stable_and_moves_only_with_semantics(tmp_path):
    base = semantic_dict(load_run_config(compose(["profile=tiny"])))
    same = semantic_dict(load_run_config(compose(["profile=tiny", f"results_root={tmp_path}", "group=other",
                                                  "force=true", f"cache_dir={tmp_path}/c", "train.fp32_matmul=ieee",
                                                  "train.profile_step=2"])))
    assert run_key(base) == run_key(same)
    for change in (["seed=2"], ["learning_rate=2e-3"], ["clip=0.1"], ["loss.beta=0.5"],
                   ["eval.n_samples=8"], ["train.max_steps=5"], ["rollout.temperature=0.7"],
                   ["eval.kv_cache_dtype=fp8"], ["rollout.kv_cache_dtype=fp8"]):
        changed = semantic_dict(load_run_config(compose(["profile=tiny", *change])))
        assert run_key(changed) != run_key(base), change


def test_a_users_config_with_the_old_baseline_section_is_refused_with_the_new_place(tmp_path):
    """The published anchor's section was `baseline:`; a user's own config that still sets it (here a primary
    config on top of ours) fails before anything runs, naming `anchor`."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    (tmp_path / "mine.yaml").write_text(f"defaults:\n  - config\n  - _self_\nhydra:\n  searchpath: "
                                        f"[file://{CONF_DIR}]\nbaseline:\n  mean: 40.0\n")
    with initialize_config_dir(config_dir=str(tmp_path), version_base="1.3"):
        cfg = hydra_compose(config_name="mine")
    with pytest.raises(ConfigError, match="config key 'baseline': the published anchor .* is now called 'anchor', "
                                          "not 'baseline'; write 'anchor'"):
        load_run_config(cfg)
    with pytest.raises(ConfigError, match="is now called 'anchor'"):
        load_run_config(compose(["+baseline.mean=40"]))


def test_training_precision_and_profile_step_are_checked_naming_the_value():
    with pytest.raises(ConfigError) as err:
        load_run_config(compose(["train.fp32_matmul=fp16", "train.profile_step=101"]))
    message = str(err.value)
    assert "train.fp32_matmul='fp16' is not one of ['tf32', 'ieee']" in message
    assert "train.profile_step=101 must be a step of the run, 1..train.max_steps=100, or null" in message


def test_a_saved_config_reads_back_as_the_run_it_was_written_from_fast_or_through_omegaconf(tmp_path):
    """from_dict builds a saved config straight into the dataclasses (status reads thousands): for every option
    of every group it gives what OmegaConf's merge gives, and a value of another type still goes through
    OmegaConf, which converts it."""
    from omegaconf import OmegaConf

    from opsd_sweep.config import RunConfig, _built, from_dict, to_dict
    from opsd_sweep.run.rundir import RunDir, atomic_write_text

    for group in ("model", "data", "recipe", "loss", "eval", "anchor", "profile"):
        for option in group_options(group):
            overrides = [f"{group}={option}"] + ([f"{group}.path={tmp_path / 't.jsonl'}"] if option == "local" else [])
            run = load_run_config(compose(overrides + (["profile=tiny"] if option.startswith("tiny") else [])))
            run_dir = RunDir(tmp_path / f"{group}-{option}")
            atomic_write_text(run_dir.config, OmegaConf.to_yaml(OmegaConf.create(to_dict(run))))
            saved = run_dir.read_config_dict()
            assert _built(RunConfig, saved) == run == OmegaConf.to_object(
                OmegaConf.merge(OmegaConf.structured(RunConfig), saved)), (group, option)
    saved["learning_rate"] = "2e-5"  # a hand-edited value: not a float, OmegaConf converts it
    assert from_dict(saved).learning_rate == 2e-5
