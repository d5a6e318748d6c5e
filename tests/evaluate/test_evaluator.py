"""The evaluator end to end on the tiny model with the hf backend: both entry points, the eval.json
contract, a kill in the middle and the resume, data-parallel CPU engines."""

from __future__ import annotations

import json
import signal
import time
from dataclasses import replace
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from opsd_sweep.config import to_dict
from opsd_sweep.evaluate.datasets import load_problems
from opsd_sweep.evaluate.evaluator import check_fits
from opsd_sweep.evaluate.evaluator import main as evaluate_run_dir
from opsd_sweep.scoring.grade import grade
from opsd_sweep.scoring.metrics import compute_metrics
from opsd_sweep.evaluate.standalone import evaluate_standalone, locate_eval_dir
from opsd_sweep.run.rundir import RunDir, atomic_write_text, read_json
from opsd_sweep.tiny import make_problem
from tests.evaluate.conftest import eval_overrides, eval_run, evaluate_cli
from tests.orchestration.conftest import wait_until
from tests.scripted_model import build_scripted_model, stopping_adapter

SAMPLE_KEYS = {"pred", "correct", "formatted", "n_tokens", "finish_reason"}


def check_eval_json(result: dict, n_problems: int, n_samples: int, run_dir: RunDir, timeout: int) -> None:
    """The DESIGN.md schema, metrics recomputed from the raw records, and texts that regrade the same. What the
    tiny model gets right is the CPU's: that these checks meet right, wrong and unformatted samples alike is
    built, not drawn (test_the_records_are_what_a_scripted_model_wrote_right_and_wrong)."""
    assert {"dataset", "n_problems", "n_samples", "sampling", "checkpoint", "backend", "metrics",
            "problems"} <= set(result)
    assert set(result["sampling"]) == {"temperature", "top_p", "top_k", "max_tokens", "thinking"}
    assert (result["n_problems"], result["n_samples"]) == (n_problems, n_samples)
    assert all(len(p["samples"]) == n_samples and set(p["samples"][0]) == SAMPLE_KEYS for p in result["problems"])
    assert result["metrics"] == compute_metrics(result["problems"])
    texts = [json.loads(line) for line in (run_dir.eval_dir / "completions.jsonl").read_text().splitlines()]
    assert len(texts) == n_problems * n_samples
    by_id = {p["id"]: p for p in result["problems"]}
    for line in texts:
        problem = by_id[line["id"]]
        recorded = problem["samples"][line["sample"]]
        regraded = grade(line["text"], problem["answer"], timeout)
        assert (regraded.pred, regraded.correct, regraded.formatted) == (
            recorded["pred"], recorded["correct"], recorded["formatted"])
    assert not (run_dir.eval_dir / "shards").exists()


def test_cycle_phase_evaluates_the_final_lora_checkpoint(tiny_world, tmp_path, capsys):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    run = eval_run(tiny_world, tmp_path)
    run_dir = RunDir(tmp_path / "run")
    atomic_write_text(run_dir.config, OmegaConf.to_yaml(OmegaConf.create(to_dict(run))))
    torch.manual_seed(0)
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    for step in (1, 2):
        model = get_peft_model(AutoModelForCausalLM.from_pretrained(run.model.path), lora)
        model.save_pretrained(run_dir.checkpoint(step))
        atomic_write_text(run_dir.checkpoint(step) / "trainer_state.json", json.dumps({"step": step}))
    result = evaluate_run_dir(run_dir.path)
    assert result["checkpoint"] == str(run_dir.checkpoint(2))  # the final one, as the cycle expects
    check_eval_json(read_json(run_dir.eval_json), 8, 2, run_dir, run.eval.grade_timeout)
    assert "avg@2" in capsys.readouterr().out
    written = run_dir.eval_json.read_text()
    evaluate_run_dir(run_dir.path)  # same plan: nothing is regenerated or rewritten
    assert run_dir.eval_json.read_text() == written
    assert "is up to date" in capsys.readouterr().out


def test_standalone_cli_writes_a_run_dir_the_analysis_reads(tiny_world, tmp_path):
    proc = evaluate_cli(eval_overrides(tiny_world, tmp_path, "group=anchor", "seed=3", "eval.grade_workers=1"))
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-3000:]
    _, run_dir = locate_eval_dir(eval_run(tiny_world, tmp_path, "group=anchor", "seed=3", "eval.grade_workers=1"))
    assert run_dir.path.parent == tmp_path / "anchor" and run_dir.path.name.startswith("eval-tiny-qwen3-base-s3-")
    status = run_dir.read_status()
    assert (status["kind"], status["state"]) == ("eval_only", "done")
    result = read_json(run_dir.eval_json)
    assert (result["checkpoint"], result["seed"], result["model"]) == (None, 3, "tiny-qwen3")
    check_eval_json(result, 8, 2, run_dir, 5)
    assert "avg@2" in out and "eval tiny-arith-heldout (1 engine(s))" in out
    again = evaluate_cli([str(run_dir.path)])  # the run-dir entry point on an eval-only dir: up to date
    out, _ = again.communicate(timeout=600)
    assert again.returncode == 0 and "is up to date" in out, out[-3000:]


def test_the_records_are_what_a_scripted_model_wrote_right_and_wrong(tiny_world, tmp_path):
    """A model that writes \\boxed{25} and stops (tests/scripted_model.py), on two problems whose answer is 25
    and two whose answer is not, and with a checkpoint under which it writes nothing: right, wrong though
    formatted, and unformatted samples, each recorded, scored and regraded as such on every CPU."""
    model, problems = tmp_path / "model", tmp_path / "problems.jsonl"
    build_scripted_model(tiny_world / "tiny" / "model", model, "25")
    rows = [make_problem(*abc) for abc in ((1, 4, 6), (5, 4, 5), (1, 2, 3), (3, 4, 5))]  # 25, 25, 7, 23
    problems.write_text("".join(json.dumps({"id": f"q{i}", **row}) + "\n" for i, row in enumerate(rows)))
    scripted = (f"model.path={model}", "model.name=scripted", f"eval.path={problems}", "group=scripted")
    result = evaluate_standalone(eval_run(tiny_world, tmp_path, *scripted))
    check_eval_json(result, 4, 2, locate_eval_dir(eval_run(tiny_world, tmp_path, *scripted))[1], 5)
    assert [[(s["pred"], s["correct"]) for s in p["samples"]] for p in result["problems"]] == \
        [[("25", True)] * 2] * 2 + [[("25", False)] * 2] * 2
    assert all(s["formatted"] and s["finish_reason"] == "stop" for p in result["problems"] for s in p["samples"])
    assert (result["metrics"]["avg_at_n"], result["metrics"]["format_rate"]) == (50.0, 100.0)
    silent = tmp_path / "silent"  # a LoRA checkpoint under which it writes EOS at once
    stopping_adapter(model, silent)
    result = evaluate_standalone(eval_run(tiny_world, tmp_path, *scripted, f"eval.checkpoint={silent}"))
    check_eval_json(result, 4, 2, locate_eval_dir(eval_run(tiny_world, tmp_path, *scripted,
                                                           f"eval.checkpoint={silent}"))[1], 5)
    assert all((s["pred"], s["correct"], s["formatted"], s["n_tokens"]) == (None, False, False, 1)
               for p in result["problems"] for s in p["samples"])
    assert (result["metrics"]["avg_at_n"], result["metrics"]["format_rate"]) == (0.0, 0.0)


def shard_files(run_dir: RunDir) -> list[Path]:
    return sorted((run_dir.eval_dir / "shards").glob("shard-*.json"))


def children_of(pid: int) -> list[int]:
    """Live child processes of pid (from /proc/*/stat: the field after the state is the parent pid)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited while we looked
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_killed_evaluation_resumes_without_redoing_finished_shards(tiny_world, tmp_path):
    """Two CPU engine processes; SIGKILL the evaluator once some shards exist; the engines die with it;
    the rerun (one engine: the layout may change) keeps every finished shard and does only the rest."""
    # batch_size = shard_size: each generate call finishes one shard, so the kill lands between shards
    # (the hf evaluator batches across shards: at the tiny profile's 128 all shards finish at once)
    extra = ("eval.max_problems=null", "eval.n_samples=2", "eval.shard_size=2", "eval.batch_size=2")
    run = eval_run(tiny_world, tmp_path, *extra)
    _, run_dir = locate_eval_dir(run)
    n_problems = len(load_problems(run.eval))
    n_shards = n_problems  # 2 samples per problem, 2 per shard
    proc = evaluate_cli(eval_overrides(tiny_world, tmp_path, *extra, "eval.engines=2"))
    deadline = time.monotonic() + 300
    while len(shard_files(run_dir)) < 3 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    engines = children_of(proc.pid)
    proc.send_signal(signal.SIGKILL)
    out, _ = proc.communicate(timeout=60)
    done_before = {p.name: p.read_text() for p in shard_files(run_dir)}
    assert 3 <= len(done_before) < n_shards, out[-3000:]
    assert len(engines) >= 2
    # PR_SET_PDEATHSIG kills them with it; their exit (freeing a model's memory) may take a while under load
    wait_until(lambda: not [pid for pid in engines if alive(pid)], 60, "the engines to die with the evaluator")
    assert run_dir.read_status()["state"] == "evaluating"  # killed: no chance to say otherwise

    result = evaluate_standalone(eval_run(tiny_world, tmp_path, *extra, "eval.engines=1"))
    assert result["timing"]["resumed_shards"] >= len(done_before)
    assert result["timing"]["total_shards"] == n_shards
    resumed = {}
    for name, text in done_before.items():
        for record in json.loads(text)["samples"]:
            resumed[record["problem"], record["sample"]] = record["text"]
    ids = [p["id"] for p in result["problems"]]
    final = {(ids.index(line["id"]), line["sample"]): line["text"]
             for line in map(json.loads, (run_dir.eval_dir / "completions.jsonl").read_text().splitlines())}
    assert all(final[key] == text for key, text in resumed.items())
    check_eval_json(result, n_problems, 2, run_dir, 5)
    assert run_dir.read_status()["state"] == "done"
    redone = evaluate_standalone(eval_run(tiny_world, tmp_path, *extra, "force=true"))  # from scratch
    assert redone["timing"]["resumed_shards"] == 0 and redone["created_at"] != result["created_at"]


def test_vllm_prompt_budget_is_checked_before_any_engine_starts(tiny_world, tmp_path):
    run = eval_run(tiny_world, tmp_path, "eval.max_model_len=41", "eval.max_new_tokens=40")
    run = replace(run, eval=replace(run.eval, backend="vllm"))  # as resolved on a GPU machine
    with pytest.raises(ValueError, match=r"eval.max_model_len=41 is too small: .* set eval.max_model_len=\d+"):
        check_fits(run, [[1] * 5])


def test_checkpoint_that_is_neither_adapter_nor_model_is_named(tiny_world, tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=r"empty holds neither adapter_config.json .* eval.checkpoint"):
        evaluate_standalone(eval_run(tiny_world, tmp_path, f"eval.checkpoint={tmp_path / 'empty'}"))


def test_run_dir_without_config_explains_both_entry_points(tmp_path):
    with pytest.raises(SystemExit, match="no config.yaml.*python -m opsd_sweep.evaluate model=... eval=..."):
        evaluate_run_dir(tmp_path)

