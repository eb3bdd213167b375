"""Shared fixtures: the repo's paths, and running the CLI as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import opgen.kinds  # noqa: F401  registers each kind's spec rules with opgen.spec, as opgen.api does

# The generated tests' markers (``deploy``), as ``opgen test`` registers them: the suite imports
# generated test modules in-process (the fuzzer's ops) and runs them.
pytest_plugins = ["opgen.testing"]

ROOT = Path(__file__).resolve().parent.parent
RELU6 = ROOT / "examples" / "relu6"
BIAS_GELU = ROOT / "examples" / "bias_gelu"
#: The rowwise kind's reference ops.
ROWWISE_EXAMPLES = {name: ROOT / "examples" / name
                    for name in ("softmax", "layer_norm", "rms_norm", "add_rms_norm")}
GPU_PYTHON = ROOT / ".venv-gpu" / "bin" / "python"


def run_opgen(*args: str, python: str | Path = sys.executable, cwd: Path | None = None,
              env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m opgen ARGS`` in a subprocess, output captured."""
    full_env = {**os.environ, "GLOG_minloglevel": "3", **(env or {})}
    return subprocess.run([str(python), "-m", "opgen", *args], capture_output=True, text=True,
                          cwd=cwd or ROOT, env=full_env, check=False)


@pytest.fixture
def opgen_cli():
    return run_opgen


def tree_snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` with its bytes (empty when ``root`` does not exist)."""
    if not root.exists():
        return {}
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file()}
