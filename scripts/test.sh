#!/usr/bin/env bash
# Set up both environments, then run the whole test suite (builds real ops: ~15 minutes).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
export GLOG_minloglevel=3
.venv/bin/python -m ruff check opgen tests
.venv/bin/python -m pytest -p no:cacheprovider "$@"
