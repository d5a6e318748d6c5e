"""The evaluation phase of a cycle: final checkpoint -> n samples per problem -> graded eval.json."""

from __future__ import annotations

from pathlib import Path

from omegaconf import OmegaConf

from opsd_sweep.config import RunConfig, from_dict
from opsd_sweep.data import load_rows
from opsd_sweep.evaluate.generate import HFGenerator
from opsd_sweep.evaluate.grade import grade
from opsd_sweep.evaluate.metrics import compute_metrics
from opsd_sweep.modeling import load_model, load_tokenizer
from opsd_sweep.prompts import render_prompt_ids
from opsd_sweep.runs import RunDir, atomic_write_json


def load_student(run: RunConfig, checkpoint: Path | None, device):
    """Base model with the run's LoRA adapter merged in (or the base model when no checkpoint)."""
    model = load_model(run.model)
    if checkpoint is not None:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(checkpoint)).merge_and_unload()
    return model.to(device)


def evaluate(run: RunConfig, checkpoint: Path | None, out_path: Path) -> dict:
    import torch

    e = run.eval
    device = torch.device("cuda" if torch.cuda.is_available() and run.train.num_gpus > 0 else "cpu")
    tokenizer = load_tokenizer(run.model)
    rows = load_rows(e.path, e.split, {"problem": e.problem_field, "answer": e.answer_field}, e.max_problems)
    prompts = [render_prompt_ids(tokenizer, e.prompt.format(problem=r["problem"]), e.thinking) for r in rows]
    generator = HFGenerator(e, load_student(run, checkpoint, device), tokenizer, device)
    generated = generator.generate(prompts, seed=run.seed)
    problems = []
    for row, samples in zip(rows, generated):
        graded = [grade(s.text, row["answer"]) for s in samples]
        problems.append({"id": row["id"], "answer": str(row["answer"]), "samples": [
            {"pred": g.pred, "correct": g.correct, "formatted": g.formatted, "n_tokens": s.n_tokens,
             "finish_reason": s.finish_reason, "text": s.text} for g, s in zip(graded, samples)]})
    result = {"dataset": e.name, "n_problems": len(problems), "n_samples": e.n_samples,
              "sampling": {"temperature": e.temperature, "top_p": e.top_p, "top_k": e.top_k,
                           "max_tokens": e.max_new_tokens, "thinking": e.thinking},
              "checkpoint": str(checkpoint) if checkpoint else None, "backend": e.backend,
              "metrics": compute_metrics(problems), "problems": problems}
    atomic_write_json(out_path, result)
    return result


def main(run_dir: str | Path) -> None:
    run_dir = RunDir(Path(run_dir))
    run = from_dict(OmegaConf.to_container(OmegaConf.load(run_dir.config)))
    checkpoint = run_dir.latest_checkpoint()
    if checkpoint is None:
        raise SystemExit(f"{run_dir.path}: no complete checkpoint under {run_dir.train_dir}; train first")
    result = evaluate(run, checkpoint, run_dir.eval_json)
    m = result["metrics"]
    print(f"{run.eval.name}: avg@{run.eval.n_samples} {m['avg_at_n']:.2f}  pass@{run.eval.n_samples} "
          f"{m['pass_at_k'][str(run.eval.n_samples)]:.2f}  format {m['format_rate']:.1f}%", flush=True)
