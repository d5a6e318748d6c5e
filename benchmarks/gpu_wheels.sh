#!/usr/bin/env bash
# The GPU machine's missing packages (benchmarks/gpu_wheels.txt) as wheels, in parts the device tool
# can carry (64 MiB a call). Run here, where pip reaches the registries:
#   bash benchmarks/gpu_wheels.sh            # -> .whl/ (the wheels), .gpucarry/part.aa, .ab, ... (both ignored)
# Then, on the device, one call per part, back to back (the machine stays while warm, 30 s idle):
#   mkdir -p /tmp/acc && cp .gpucarry/part.XX /tmp/acc/            (carry [".gpucarry/part.XX"])
# and after the last:
#   mkdir -p /tmp/whl && cat /tmp/acc/part.* | tar xf - -C /tmp/whl &&
#   python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site /tmp/whl/*.whl
#   export PYTHONPATH=/tmp/site:$PWD/src NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
set -euo pipefail
cd "$(dirname "$0")/.."
PINS=benchmarks/gpu_wheels.txt
PART_BYTES=52m  # under the 64 MiB a call carries, with room for the working tree (~7 MiB in December)
PLATFORMS=()  # pip prefers the earlier tags: 2_28 first gives the set that ran on the H200 (2026-12-03)
for tag in manylinux_2_28 manylinux_2_17 manylinux_2_24 manylinux_2_27 manylinux_2_31 manylinux2014 \
           manylinux_2_34 manylinux_2_35; do
    PLATFORMS+=(--platform "${tag}_x86_64")
done
PLATFORMS+=(--platform any)

mkdir -p .whl
mapfile -t pins < <(grep -v '^#' "$PINS" | grep -v '^antlr4-python3-runtime==')
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    "${PLATFORMS[@]}" -d .whl "${pins[@]}"
python3 -m pip wheel -q --no-deps -w .whl "$(grep '^antlr4-python3-runtime==' "$PINS")"  # sdist only on PyPI

expected=$(grep -vc '^#' "$PINS")
found=$(ls .whl/*.whl | wc -l)
if [ "$found" -ne "$expected" ]; then  # a stale extra wheel would stop the install on the device
    echo "gpu_wheels: .whl holds $found wheels, $PINS pins $expected: empty .whl and run again" >&2
    exit 1
fi
rm -rf .gpucarry && mkdir .gpucarry
tar cf - -C .whl . | split -b "$PART_BYTES" - .gpucarry/part.
echo "gpu_wheels: $found wheels ($(du -sh .whl | cut -f1)) in $(ls .gpucarry | wc -l) parts under .gpucarry/"
