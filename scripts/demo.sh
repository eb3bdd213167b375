#!/usr/bin/env bash
# The relu6 demo, from nothing: set up, then generate, build, test and benchmark examples/relu6.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
export GLOG_minloglevel=3
opgen() { .venv/bin/python -m opgen "$@"; }

echo "== generate (the checked-in files must match a fresh render)"
opgen generate --check examples/relu6/relu6.yaml
echo "== build (Paddle $(.venv/bin/python -c 'import importlib.metadata as m; print(m.version("paddlepaddle"))'), CPU)"
opgen build examples/relu6
echo "== test"
opgen test examples/relu6 --device cpu -- -q -p no:warnings
echo "== the CUDA sources compile and link with paddlepaddle-gpu 2.6.2 (no GPU needed)"
.venv-gpu/bin/python -m opgen build examples/relu6 --arch 90
echo "== benchmark (CPU; GPU figures are in docs/benchmarks.md)"
opgen bench examples/relu6 --sizes 2^16,2^20 --dtype float32 --repeats 3
