"""Name clashes (issue 5 §3): registered op names against the installed Paddle's own registry,
through the CLI, and ops that cannot share one built library."""

from __future__ import annotations

import os
import re
import sys
import textwrap
import types
from pathlib import Path

import pytest
from conftest import RELU6, run_opgen, tree_snapshot

from opgen import names, probe
from opgen.errors import UsageError
from opgen.spec import Spec, loads

pytestmark = pytest.mark.skipif(probe.paddle_version() is None, reason="needs Paddle installed")


def _spec_folder(tmp_path: Path, text: str, name: str = "relu6") -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / f"{name}.yaml").write_text(text)
    return folder / f"{name}.yaml"


def _relu6_with(op_name_line: str) -> str:
    text = (RELU6 / "relu6.yaml").read_text()
    replaced = re.sub(r"^op_name: .*$", op_name_line, text, count=1, flags=re.M)
    assert replaced != text
    return replaced


def _line_of(text: str, start: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if line.startswith(start))


def test_builtin_op_name_is_refused_through_the_cli(tmp_path):
    text = _relu6_with("op_name: relu6")
    spec = _spec_folder(tmp_path, text)
    before = tree_snapshot(tmp_path)
    result = run_opgen("generate", str(spec))
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stderr == (
        f"error: {spec}:{_line_of(text, 'op_name:')}: op_name 'relu6' is a Paddle built-in op, "
        "and registering it would replace Paddle's own; use 'custom_relu6'\n")
    assert result.stdout == ""
    assert tree_snapshot(tmp_path) == before  # nothing written, not even a lock file
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["relu6", "relu6.yaml"]


def test_builtin_op_name_is_refused_with_out_and_writes_no_folder(tmp_path):
    spec = _spec_folder(tmp_path, _relu6_with("op_name: relu6"))
    result = run_opgen("generate", str(spec), "--out", str(tmp_path / "elsewhere"))
    assert result.returncode == 2 and "use 'custom_relu6'" in result.stderr
    assert not (tmp_path / "elsewhere").exists()


def test_a_clash_of_the_gradient_op_alone_is_refused(tmp_path):
    """op_name X is free but X_grad is Paddle's: the generated op would register X_grad too."""
    builtins = names.paddle_builtin_ops()
    taken_grads = sorted(n for n in builtins if n.endswith("_grad") and n[:-5] not in builtins)
    if not taken_grads:
        pytest.skip("this Paddle has no gradient op without its forward op")
    op_name = taken_grads[0][: -len("_grad")]
    text = _relu6_with(f"op_name: {op_name}")
    spec = _spec_folder(tmp_path, text)
    result = run_opgen("generate", str(spec))
    assert result.returncode == 2
    suggestion = names.free_op_name(op_name, builtins)
    assert result.stderr == (
        f"error: {spec}:{_line_of(text, 'op_name:')}: the gradient op '{op_name}_grad' of "
        f"op_name '{op_name}' is a Paddle built-in op, and registering it would replace "
        f"Paddle's own; use '{suggestion}'\n")


@pytest.mark.parametrize("op_name", ["relu6", "exp", "clip", "matmul", "custom_relu6_2"])
def test_the_suggested_name_is_free(op_name):
    builtins = names.paddle_builtin_ops() | {"custom_relu6", "custom_relu6_2"}
    free = names.free_op_name(op_name, builtins)
    assert free not in builtins and f"{free}_grad" not in builtins
    assert names.op_name_problem(free) is None


def test_the_registry_is_paddles_own():
    """Not a hard-coded list: the registry holds ops that only a real Paddle knows about."""
    builtins = names.paddle_builtin_ops()
    assert len(builtins) > 500
    assert {"relu6", "relu6_grad", "exp", "matmul", "softmax_with_cross_entropy"} <= builtins


def test_an_unreadable_registry_is_an_error_not_a_silent_pass(tmp_path):
    """Paddle installed (its metadata is there) but failing to import: generate stops with one
    error line instead of letting an unchecked op_name through."""
    fake = tmp_path / "fake_site"
    (fake / "paddle").mkdir(parents=True)
    (fake / "paddle" / "__init__.py").write_text(
        "raise ImportError('libpaddle.so: cannot open shared object file (simulated)')\n")
    spec = _spec_folder(tmp_path, _relu6_with("op_name: custom_relu6"))
    before = tree_snapshot(spec.parent)
    env = {"PYTHONPATH": os.pathsep.join([str(fake), os.environ.get("PYTHONPATH", "")]),
           "XDG_CACHE_HOME": str(tmp_path / "cache")}  # no cached registry to fall back on
    result = run_opgen("generate", str(spec), env=env)
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith("error: cannot read the op registry of the installed Paddle")
    assert "libpaddle.so: cannot open shared object file (simulated)" in result.stderr
    assert tree_snapshot(spec.parent) == before


# ---- ops that cannot share one library -----------------------------------------------------------

def _op(name: str, op_name: str | None = None, folder: str = "ops") -> Spec:
    header = f"name: {name}\n" + (f"op_name: {op_name}\n" if op_name else "")
    text = header + textwrap.dedent("""\
        kind: elementwise
        inputs: [x]
        outputs: [out]
        forward:
          out: x * 2
        """)
    return loads(text, f"/{folder}/{name}/{name}.yaml", check_builtins=False)


def test_ops_with_distinct_names_share_a_build():
    names.check_one_build([_op("twice"), _op("thrice"), _op("halved", "custom_halve")])


def test_two_ops_with_one_op_name_are_refused():
    first, second = _op("twice", "custom_doubled"), _op("doubled", folder="mine")
    with pytest.raises(UsageError) as info:
        names.check_one_build([first, second])
    assert str(info.value) == (
        "these ops cannot be built together: op_name 'custom_doubled' of op doubled "
        "(/mine/doubled/doubled.yaml) is already taken by op twice (/ops/twice/twice.yaml) as its "
        "op_name; gradient op 'custom_doubled_grad' of op doubled (/mine/doubled/doubled.yaml) is "
        "already taken by op twice (/ops/twice/twice.yaml) as its gradient op")


@pytest.mark.parametrize("first, second, clashes", [
    # one name: the same csrc/<name>.cc and Python module, and the same C++ functions
    (("twice", None), ("twice", "custom_twice_again"), ["name 'twice'", "C++ prefix 'Twice'"]),
    # distinct names, one C++ prefix: both define Fz1Forward
    (("fz_1", None), ("fz1", None), ["C++ prefix 'Fz1'"]),
])
def test_other_clashes_in_one_build_are_refused(first, second, clashes):
    ops = [_op(*first), _op(*second, folder="more")]
    problems = names.one_build_clashes(ops)
    assert [p.split(" of op ")[0] for p in problems] == clashes, problems


def test_an_op_name_that_is_another_ops_gradient_op_is_refused():
    """A spec can no longer say so (op_names may not contain _grad), but the check does not
    rely on that: anything with name, op_name and path can be checked."""
    twice = _op("twice")
    other = types.SimpleNamespace(name="other", op_name="custom_twice_grad",
                                  path=Path("/more/other/other.yaml"))
    assert names.one_build_clashes([twice, other]) == [
        "op_name 'custom_twice_grad' of op other (/more/other/other.yaml) is already taken by "
        "op twice (/ops/twice/twice.yaml) as its gradient op"]


@pytest.mark.parametrize("name, op_name", [("sq_grad", None), ("grad_sq", None),
                                           ("sq", "sq_gradient")])
def test_op_names_with_grad_inside_are_refused(tmp_path, name, op_name):
    """paddle.utils.cpp_extension strips '_grad' from registered names: such a library builds
    and then fails to load ("The info of custom op : custom_sq is not exists!")."""
    effective = op_name or f"custom_{name}"
    text = f"name: {name}\n" + (f"op_name: {op_name}\n" if op_name else "") + textwrap.dedent("""\
        kind: elementwise
        inputs: [x]
        outputs: [out]
        forward:
          out: x * x
        """)
    spec = _spec_folder(tmp_path, text, name)
    result = run_opgen("generate", str(spec))
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"error: {spec}:")
    assert result.stderr.rstrip().endswith(
        f"op_name '{effective}' contains '_grad', which Paddle reserves for gradient ops: the "
        "built library would fail to load")
    assert sorted(p.name for p in spec.parent.iterdir()) == [spec.name]


def test_the_fuzz_harness_refuses_a_clash_before_compiling(tmp_path):
    sys.path.insert(0, str(Path(__file__).parent))
    import fuzzing

    with pytest.raises(UsageError, match="op_name 'custom_doubled'"):
        fuzzing.build_library([_op("twice", "custom_doubled"), _op("doubled")], tmp_path / "lib",
                              cpu_only=True)
    assert not (tmp_path / "lib").exists()
