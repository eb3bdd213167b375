#!/usr/bin/env bash
# Set up the two Python environments opgen is developed and tested with:
#   .venv      paddlepaddle 3.3.1 (CPU) + opgen (editable, with dev extras): builds and runs CPU ops
#   .venv-gpu  paddlepaddle-gpu 2.6.2 + opgen: proves the generated .cu sources compile and link
# The two Paddle builds cannot share one environment (they install the same `paddle` package).
# Idempotent: an environment whose stamp matches pyproject.toml and this script is left alone.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
py=${PYTHON:-python3}
stamp=$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)

make_env() {  # make_env DIR PADDLE_REQUIREMENT...
  local dir=$1; shift
  if [ -f "$dir/.opgen-stamp" ] && [ "$(cat "$dir/.opgen-stamp")" = "$stamp" ]; then
    return 0
  fi
  echo "== setting up $dir ($*): a few minutes, log in $dir.log"
  rm -rf "$dir"
  "$py" -m venv "$dir"
  if ! { "$dir/bin/python" -m pip install --upgrade pip &&
         "$dir/bin/python" -m pip install "$@" -e ".[dev]"; } > "$dir.log" 2>&1; then
    grep -v "^WARNING: Location" "$dir.log" | tail -n 20 >&2
    echo "error: setting up $dir failed (full log: $dir.log)" >&2
    exit 1
  fi
  echo "$stamp" > "$dir/.opgen-stamp"
}

make_env .venv "paddlepaddle==3.3.1"
if [ "${OPGEN_SKIP_GPU_ENV:-0}" != 1 ]; then
  # Paddle 2.6 predates numpy 2 and protobuf 4.
  make_env .venv-gpu "paddlepaddle-gpu==2.6.2" "numpy<2" "protobuf>=3.20,<4"
fi
