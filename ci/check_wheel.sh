#!/usr/bin/env bash
# The installable package, as a cluster node gets it: build a wheel from the checkout's files, install it
# into a fresh venv (CPU torch pinned), and from an empty directory outside the checkout run --help, the
# design card's command with --cfg job and one tiny cycle. ~2-3 min on 2 cores (pip's cache makes the
# reinstall cheap). Usage: bash ci/check_wheel.sh [TORCH_REQUIREMENT]  (default torch==2.13.0)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
torch_req="${1:-torch==2.13.0}"   # never unpinned: that pulls a 5 GB CUDA build
work="$(mktemp -d -t opsd_wheel.XXXXXX)"
trap 'rm -rf "$work"' EXIT
export HF_HUB_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1 TOKENIZERS_PARALLELISM=false

# The checkout's tracked and new files only: a stale build/ there must not fill a gap of the package list.
mkdir "$work/source"
(cd "$repo" && git ls-files -co --exclude-standard -z | xargs -0 -I{} sh -c 'test -f "{}" && printf "%s\0" "{}"' \
  | tar --null -T - -cf -) | tar -xf - -C "$work/source"
python3 -m venv "$work/venv"
py="$work/venv/bin/python"
"$py" -m pip install -q --upgrade pip
"$py" -m pip wheel -q --no-deps -w "$work/dist" "$work/source"
wheel=("$work"/dist/opsd_sweep-*.whl)
"$py" -m pip install -q "$torch_req" "${wheel[0]}"

mkdir "$work/elsewhere" && cd "$work/elsewhere"   # no conf/ here, and the checkout is not on the path
conf_dir="$("$py" -c 'import opsd_sweep; print(opsd_sweep.CONF_DIR)')"
case "$conf_dir" in "$work/venv/"*) ;; *) echo "check_wheel: CONF_DIR is $conf_dir, not inside the venv"; exit 1;; esac
# whole outputs first: `| grep -q` stops reading at its match, and a writer still printing dies of EPIPE
help_text="$("$py" -m opsd_sweep --help)"
grep -q "profile: tiny" <<< "$help_text"
job_cfg="$("$py" -m opsd_sweep learning_rate=1.4e-5 seed=1 --cfg job)"
grep -q "name: qwen3-1.7b" <<< "$job_cfg"
# One tiny cycle in a cheaper world (a short warm start): the package, not the model, is under test.
"$py" -m opsd_sweep profile=tiny results_root=results train.max_steps=2 train.save_steps=2 eval.n_samples=2 \
  tiny.warm_start.steps=20 tiny.n_eval=8
status=(results/tiny/*/status.json)
"$py" -c 'import json, sys; s = json.load(open(sys.argv[1])); assert s["state"] == "done", s' "${status[0]}"
test -f "$(dirname "${status[0]}")/eval/eval.json"
echo "check_wheel: ${wheel[0]##*/} installed in a fresh venv runs --help, --cfg job and a tiny cycle from $PWD"
