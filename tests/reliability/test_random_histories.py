"""Issue 21: random histories on the simulator. Each is a sequence of steps (an input edited in place, a
rerun, a kill -9 in the middle of a run, an upgrade that changes the run key, scores made known-wrong, the
local model dir edited in place), ended by a rerun. After
it, the summary's rows of today's inputs and the results in their run dirs equal those of a fresh sweep
of the same final inputs: nothing of an earlier input is reused or pooled, nothing of today's is lost.

A simulated run's draw depends on the content of its local inputs (simulate.simulate_run), so a run
reused for an edited input shows as other scores. The kill is what kill -9 leaves (the cycle's files
as they stand at that moment, a claim of a dead process), made deterministically from a finished run.
Seeds are fixed: a failing history reproduces from the seed in the test's id.

A simulated eval.json is exempt from the evaluator checks (identity.evaluator_problem) and a simulated run
has no checkpoint to be rewritten since, so the one way its scores are known-wrong is an eval.json of
fewer samples per problem than eval.n_samples (a round of eval.checkpoints=race): "wrong_eval" makes that,
with an absurd avg_at_n, which the final rerun must evaluate again. The model is a local dir (it enters the
run key by its place and content), so "model_edit" rewrites its weights in place.
"""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path

import pytest
import yaml

from opsd_sweep.summarize.collect import collect
from opsd_sweep.config import load_run_config
from opsd_sweep.cycle import run_cycle
from opsd_sweep.run.claims import owner_info
from tests.conftest import compose

SEEDS = (1, 2)
ADDED_SINCE_AN_EARLIER_RELEASE = (("train", "teacher"), ("train", "ema_decay"), ("eval", "checkpoints"),
                                  ("eval", "suite"))
STEPS = ("edit", "rerun", "kill", "upgrade", "wrong_eval", "model_edit")


class History:
    def __init__(self, root: Path, cache_dir: Path, rng: random.Random):
        self.root, self.cache_dir, self.rng = root, cache_dir, rng
        self.inputs = {"data": root / "inputs" / "train.jsonl", "eval": root / "inputs" / "test.jsonl"}
        self.inputs["data"].parent.mkdir(parents=True)
        for name in self.inputs:
            self.edit(name)
        self.model, self.model_edits = root / "inputs" / "model", 0
        self.model.mkdir()
        (self.model / "config.json").write_text(json.dumps({"model_type": "qwen3"}))
        self.model_edit()

    def edit(self, name: str) -> None:
        """Rewrite an input in place with other problems."""
        rows = [{"problem": f"p{i}", "solution": str(self.rng.randrange(100)), "answer": str(self.rng.randrange(100))}
                for i in range(3)]
        self.inputs[name].write_text("".join(json.dumps(row) + "\n" for row in rows))

    def model_edit(self, *_) -> None:
        """Rewrite the model dir's weights in place. Each rewrite is longer than the last, so no cache of a
        file's hash by (path, size, mtime) can take it for the previous one, however fast it comes."""
        self.model_edits += 1
        weights = [self.rng.randrange(100) for _ in range(4)]
        (self.model / "model.safetensors").write_text(json.dumps(weights) + "#" * self.model_edits)

    def sweep(self, results: Path) -> None:
        for seed in SEEDS:
            run = load_run_config(compose(["executor=simulate", "group=g", "data=local", "eval=local",
                                           f"model.path={self.model}", f"data.path={self.inputs['data']}", f"eval.path={self.inputs['eval']}",
                                           f"seed={seed}", f"results_root={results}", f"cache_dir={self.cache_dir}"]))
            assert run_cycle(run)["state"] in ("done", "skipped")

    def run_dirs(self, results: Path) -> list[Path]:
        group = results / "g"
        return sorted(p for p in group.iterdir() if (p / "config.yaml").exists()) if group.exists() else []

    def kill(self, run_dir: Path) -> None:
        """What kill -9 leaves at a random moment of a simulated cycle: claimed and marked pending (nothing
        written yet), metrics written but no eval.json, or eval.json written but the run not marked done."""
        moment = self.rng.choice(("claimed", "metrics", "eval"))
        if moment in ("claimed", "metrics"):
            (run_dir / "eval" / "eval.json").unlink(missing_ok=True)
        if moment == "claimed":
            (run_dir / "train" / "metrics.jsonl").unlink(missing_ok=True)
        status = json.loads((run_dir / "status.json").read_text())
        status |= {"state": "pending", "ended_at": None}
        (run_dir / "status.json").write_text(json.dumps(status))
        (run_dir / "status.prev.json").write_text(json.dumps(status))
        claims = run_dir / "claims"
        claims.mkdir(exist_ok=True)
        number = max([int(p.name) for p in claims.iterdir() if p.name.isdigit()], default=0) + 1
        (claims / f"{number:08d}").write_text(json.dumps(owner_info() | {"pid": dead_pid(), "pid_start": None}))

    def wrong_eval(self, run_dir: Path) -> None:
        """Scores the code knows are not today's: an eval.json of fewer samples per problem than the run's
        eval.n_samples (all a simulated run can show; see the module docstring), with an absurd avg@n so
        that a leak into the final results shows."""
        path = run_dir / "eval" / "eval.json"
        if not path.exists():  # killed before its evaluation was written: nothing to make wrong
            return
        evaluation = json.loads(path.read_text())
        evaluation["n_samples"] = evaluation["n_samples"] // 2
        evaluation["metrics"]["avg_at_n"] = 100.0
        path.write_text(json.dumps(evaluation))

    def upgrade(self, run_dir: Path) -> None:
        """The dir as a release before identity records, and before the knobs added since, wrote it: other
        key suffix, no identity.json, config.yaml without the added fields."""
        config = yaml.safe_load((run_dir / "config.yaml").read_text())
        for section, name in ADDED_SINCE_AN_EARLIER_RELEASE:
            config[section].pop(name, None)
        (run_dir / "config.yaml").write_text(yaml.safe_dump(config))
        (run_dir / "identity.json").unlink(missing_ok=True)
        earlier_key = f"{self.rng.getrandbits(64):016x}"
        status = json.loads((run_dir / "status.json").read_text()) | {"key": earlier_key}
        (run_dir / "status.json").write_text(json.dumps(status))
        (run_dir / "status.prev.json").write_text(json.dumps(status))
        run_dir.rename(run_dir.with_name(f"{run_dir.name[:-8]}{earlier_key[:8]}"))

    def play(self, length: int) -> list[str]:
        done = []
        for _ in range(length):
            step = self.rng.choice(STEPS)
            dirs = self.run_dirs(self.root / "results")
            if step == "edit":
                self.edit(self.rng.choice(sorted(self.inputs)))
            elif step == "model_edit":
                self.model_edit()
            elif step == "rerun":
                self.sweep(self.root / "results")
            elif dirs:
                getattr(self, step)(self.rng.choice(dirs))
            done.append(step)
        self.sweep(self.root / "results")
        return done + ["rerun"]


def dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def usable_runs(results: Path) -> dict[tuple, dict]:
    """The runs the summary uses, by their input identities, then seed -> their eval results and recorded
    identities; and no label (a row of the summary) mixes two identities."""
    collection = collect([str(results)])
    runs = collection.runs
    identity = [c for c in runs.columns if c.startswith("id.")]
    assert (runs.groupby("label")[identity].nunique() <= 1).all().all(), runs[["label", *identity]]
    usable = runs[runs["state"].eq("done") & ~runs["run_dir"].isin(collection.skipped["path"])]
    found = {}
    for row in usable.to_dict("records"):
        by_seed = found.setdefault(tuple(row[c] for c in identity), {})
        assert row["cfg.seed"] not in by_seed, row  # counted once
        by_seed[row["cfg.seed"]] = eval_results(Path(row["run_dir"]))
    return found


def eval_results(run_dir: Path) -> dict:
    evaluation = json.loads((run_dir / "eval" / "eval.json").read_text())
    record = run_dir / "identity.json"  # none in a dir of an earlier release
    return {"metrics": evaluation["metrics"], "problems": evaluation["problems"],
            "inputs": json.loads(record.read_text())["inputs"] if record.exists() else None}


@pytest.mark.parametrize("seed", [11, 12, 13, 14, 15, 16])
def test_a_random_history_ends_as_a_fresh_sweep_of_its_final_inputs(tmp_path, cache_dir, seed):
    history = History(tmp_path, cache_dir, random.Random(seed))
    steps = history.play(length=8)
    fresh = tmp_path / "fresh"
    history.sweep(fresh)
    [(final, expected)] = usable_runs(fresh).items()
    assert sorted(expected) == list(SEEDS)
    assert usable_runs(tmp_path / "results").get(final) == expected, steps


def test_scores_made_known_wrong_by_a_history_are_not_counted_before_the_rerun(tmp_path, cache_dir):
    history = History(tmp_path, cache_dir, random.Random(0))
    history.sweep(tmp_path / "results")
    wrong = history.run_dirs(tmp_path / "results")[0]
    history.wrong_eval(wrong)
    collection = collect([str(tmp_path / "results")])
    runs = collection.runs.set_index("run_dir")
    assert not runs.loc[str(wrong), "counts"]
    assert str(wrong) in set(collection.skipped["path"])
