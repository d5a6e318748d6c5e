# opsd_sweep — `make help` lists the targets.
VENV   ?= .venv
PY     := $(VENV)/bin/python
# CPU machines: the local CPU build of torch (an unpinned torch pulls a 5 GB CUDA build).
# GPU machines: make install TORCH=torch (or the build your CUDA needs).
TORCH  ?= torch==2.13.0
RESULTS ?= results
SUMMARY_ARGS ?=
export HF_HUB_OFFLINE ?= 1
export HF_HUB_DISABLE_TELEMETRY ?= 1
export TOKENIZERS_PARALLELISM ?= false

.PHONY: help install install-gpu gpu-check demo plan summary confirm test test-fast check-wheel clean

help:  ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --upgrade pip
	$(VENV)/bin/pip install "$(TORCH)" -e '.[test]'
	touch $@

install: $(VENV)/.installed  ## create the venv and install opsd_sweep + test tools (when missing)

install-gpu: install  ## add the GPU extra (vllm)
	$(VENV)/bin/pip install -e '.[gpu]'

GPU_CHECK_ARGS ?=
gpu-check:  ## on a GPU box after install-gpu: a real 2-seed sweep of 1.7B-shaped cycles, offline (~10 min); GPU_CHECK_ARGS="--model DIR"
	$(PY) -m opsd_sweep.gpu_check --work .cache/opsd_sweep/gpu_check $(GPU_CHECK_ARGS)

# The demo (conf/sweep/demo.yaml): the tiny base model evaluated as is (train.max_steps=0) is the
# in-sweep baseline of OPSD runs at two learning rates; scripts/demo_robustness.py reruns it with other seeds.
# Its last step confirms the winner on 3 fresh seeds of both arms, on the tiny world's locked problems
# (conf/eval/tiny_locked.yaml) and on the tuning problems: results/tiny-demo/confirm.md.
DEMO_SEEDS ?= 1,2,3
demo: install  ## the tiny CPU demo (~2 min on 2 cores, +1 min the first time; offline): base model vs OPSD at 2 learning rates x 3 seeds, verdicts, plots, then a locked confirmation of the winner
	$(PY) -m opsd_sweep.evaluate -m profile=tiny +sweep=demo train.max_steps=0 seed=$(DEMO_SEEDS) results_root=$(RESULTS)
	$(PY) -m opsd_sweep -m profile=tiny +sweep=demo learning_rate=1e-2,3e-2 seed=$(DEMO_SEEDS) results_root=$(RESULTS)
	$(PY) -m opsd_sweep.summary $(RESULTS)/tiny-demo --baseline max_steps=0
	$(PY) -m opsd_sweep.confirm $(RESULTS)/tiny-demo --baseline max_steps=0 --locked eval=tiny_locked --seeds 3

PLAN_ARGS ?= profile=tiny +sweep=demo learning_rate=1e-2,3e-2 seed=$(DEMO_SEEDS)
plan: install  ## before a sweep: GPU-hours per design to find a gain, and what a budget resolves (~1 min); PLAN_ARGS="+sweep=lr_grid --baseline lr_scheduler=constant --effect 1.6 --budget 200 --gpu H100"
	$(PY) -m opsd_sweep.plan $(PLAN_ARGS)

summary: install  ## verdicts, seeds advice, tables and plots for RESULTS (default results), each problem set apart (after make demo: the sweep's and its confirmation's); more flags: SUMMARY_ARGS="--baseline max_steps=0"
	$(PY) -m opsd_sweep.summary $(RESULTS) $(SUMMARY_ARGS)

CONFIRM_DIR ?= $(RESULTS)/tiny-demo
CONFIRM_ARGS ?=
confirm: install  ## fresh seeds of the best config and the baseline of CONFIRM_DIR (default results/tiny-demo) on a locked benchmark (eval=aime25) and the tuning one; CONFIRM_ARGS="--locked eval=hmmt25 --seeds 8 -- hydra/launcher=slurm_4gpu"
	$(PY) -m opsd_sweep.confirm $(CONFIRM_DIR) $(CONFIRM_ARGS)

test: install  ## the test suite (what CI runs; 13-19 min of pytest on 2 cores, BENCHMARKS.md's fresh-clone rows)
	$(PY) -m pytest

test-fast: install  ## the tests not marked slow (no real multi-process sweeps)
	$(PY) -m pytest -m "not slow"

check-wheel:  ## build a wheel, install it in a fresh venv, run --help, --cfg job and a tiny cycle outside the checkout (~2 min)
	bash ci/check_wheel.sh "$(TORCH)"

clean:  ## remove results and caches (keeps the venv)
	rm -rf $(RESULTS) .cache multirun outputs .pytest_cache
