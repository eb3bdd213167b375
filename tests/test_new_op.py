"""`opgen new` gives an op that builds and passes its own tests at once; the user then edits the
spec's math, regenerates, and the op still builds and passes."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import run_opgen

pytestmark = pytest.mark.build


def test_new_op_builds_and_passes_then_survives_a_math_edit(tmp_path):
    assert run_opgen("new", "scaled_tanh", "--elementwise", "--dir", str(tmp_path)).returncode == 0
    op = tmp_path / "scaled_tanh"
    first = run_opgen("test", str(op), "--device", "cpu", "--", "-q", "-p", "no:warnings")
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-2000:]

    spec = op / "scaled_tanh.yaml"
    text = spec.read_text()
    text = text.replace("# attrs:", "attrs:").replace(
        "#   alpha: {type: float, default: 1.0}", "  alpha: {type: float, default: 1.5}")
    assert "backward: auto" in text
    text = text.replace("  out: x ", "  out: alpha * tanh(x) ")
    spec.write_text(text)
    generated = run_opgen("generate", str(spec))
    assert generated.returncode == 0, generated.stderr
    header = (op / "csrc" / "scaled_tanh.h").read_text()
    assert "alpha * tanh(x)" in header
    # the backward derived from the new forward
    assert "// grad_x = grad_out * alpha * (1 - tanh(x) ** 2)" in header
    second = run_opgen("test", str(op), "--device", "cpu", "--", "-q", "-p", "no:warnings")
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-2000:]
    assert "other-attrs" in run_opgen("test", str(op), "--device", "cpu", "--", "-q",
                                      "--collect-only").stdout


def test_a_plain_pytest_knows_the_generated_tests_markers(tmp_path):
    """Where opgen is installed, pytest loads opgen.testing on its own (an entry point), so a
    generated op's tests run with a plain `pytest` in its folder, with no conftest and no -p,
    and `-m deploy` selects without an unknown-marker warning."""
    result = subprocess.run([sys.executable, "-m", "pytest", "--markers", "-p", "no:cacheprovider"],
                            cwd=tmp_path, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "@pytest.mark.deploy: to_static, jit.save" in result.stdout, result.stdout[-2000:]
