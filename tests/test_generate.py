"""Rendering and writing: golden files, --check, --pretend, atomic writes, `opgen new`."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import numpy as np
import pytest
from conftest import BIAS_GELU, RELU6, run_opgen, tree_snapshot

from opgen import api, journal, writer
from opgen.errors import DriftError, UsageError, WriteError

RENDERED = ["README.md", "csrc/opgen/broadcast.cuh", "csrc/opgen/broadcast.h",
            "csrc/opgen/cpu.h", "csrc/opgen/cuda.cuh", "csrc/opgen/divider.h",
            "csrc/opgen/elementwise.cuh", "csrc/opgen/elementwise.h", "csrc/opgen/error.h",
            "csrc/opgen/launch.cuh", "csrc/opgen/math.h", "csrc/opgen/paddle.h",
            "csrc/opgen/text.h", "csrc/relu6.cc", "csrc/relu6.cu", "csrc/relu6.h", "relu6.py",
            "setup.py", "test_relu6.py"]
# Plus the answers file and the base snapshot that the next regenerate merges edits against.
GENERATED = [*RENDERED, ".opgen-answers.yml", *(f".opgen/base/{rel}" for rel in RENDERED)]


@pytest.mark.parametrize("spec", [RELU6 / "relu6.yaml", BIAS_GELU / "bias_gelu.yaml"],
                         ids=lambda p: p.stem)
def test_examples_have_no_drift(spec):
    result = run_opgen("generate", "--check", str(spec))
    assert result.returncode == 0, result.stderr
    assert "up to date" in result.stdout


def test_fresh_render_matches_the_checked_in_example(tmp_path):
    op = tmp_path / "relu6"
    op.mkdir()
    shutil.copy(RELU6 / "relu6.yaml", op / "relu6.yaml")
    api.generate(op / "relu6.yaml")
    for rel in GENERATED:
        assert (op / rel).read_bytes() == (RELU6 / rel).read_bytes(), rel


def test_check_reports_an_edited_file(tmp_path):
    op = tmp_path / "relu6"
    shutil.copytree(RELU6, op, ignore=shutil.ignore_patterns("build"))
    (op / "csrc" / "relu6.cu").write_text("// edited\n")
    with pytest.raises(DriftError, match=r"csrc/relu6.cu \(differs\)"):
        api.generate(op / "relu6.yaml", check=True)
    result = run_opgen("generate", "--check", str(op / "relu6.yaml"))
    assert result.returncode == 1
    assert result.stderr.startswith("error: ") and "csrc/relu6.cu" in result.stderr


def test_pretend_writes_nothing(tmp_path):
    spec = tmp_path / "relu6.yaml"
    shutil.copy(RELU6 / "relu6.yaml", spec)
    before = tree_snapshot(tmp_path)
    result = run_opgen("generate", str(spec), "--pretend")
    assert result.returncode == 0, result.stderr
    assert "would    create" in result.stdout
    assert tree_snapshot(tmp_path) == before


def test_generate_into_out_copies_the_spec(tmp_path):
    result = api.generate(RELU6 / "relu6.yaml", tmp_path / "out")
    assert result.written
    assert (tmp_path / "out" / "relu6.yaml").read_bytes() == (RELU6 / "relu6.yaml").read_bytes()
    assert {c.status for c in api.generate(RELU6 / "relu6.yaml", tmp_path / "out").changes} == \
        {writer.Status.IDENTICAL}


def test_a_failed_write_leaves_the_old_op_untouched(tmp_path, monkeypatch):
    op = tmp_path / "relu6"
    shutil.copytree(RELU6, op, ignore=shutil.ignore_patterns("build"))
    spec = op / "relu6.yaml"
    spec.write_text(spec.read_text().replace("default: 6.0", "default: 5.0"))
    before = tree_snapshot(op)
    calls = {"n": 0}
    real_stage = journal._stage

    def failing_stage(dest: Path, rel: str, data: bytes) -> None:
        calls["n"] += 1
        if calls["n"] == 4:
            raise OSError("disk full (injected)")
        real_stage(dest, rel, data)

    monkeypatch.setattr(journal, "_stage", failing_stage)
    with pytest.raises(OSError, match="injected"):
        api.generate(spec)
    assert tree_snapshot(op) == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != ".relu6.opgen.lock") == ["relu6"]


def test_a_failed_first_render_leaves_no_folder(tmp_path, monkeypatch):
    def failing_stage(dest: Path, rel: str, data: bytes) -> None:
        raise OSError("injected")

    monkeypatch.setattr(journal, "_stage", failing_stage)
    with pytest.raises(OSError):
        api.new("my_op", directory=tmp_path)
    assert [p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock")] == []


def test_new_scaffolds_a_spec_and_the_op(tmp_path):
    result = run_opgen("new", "my_op", "--elementwise", "--dir", str(tmp_path))
    assert result.returncode == 0, result.stderr
    op = tmp_path / "my_op"
    assert (op / "my_op.yaml").exists() and (op / "csrc" / "my_op.cu").exists()
    assert run_opgen("generate", "--check", str(op / "my_op.yaml")).returncode == 0


def test_new_refuses_an_existing_folder_without_force(tmp_path):
    (tmp_path / "my_op").mkdir()
    (tmp_path / "my_op" / "notes.txt").write_text("mine")
    result = run_opgen("new", "my_op", "--elementwise", "--dir", str(tmp_path))
    assert result.returncode != 0
    assert result.stderr.count("\n") == 1 and "already exists; use --force" in result.stderr
    assert tree_snapshot(tmp_path / "my_op") == {"notes.txt": b"mine"}
    forced = run_opgen("new", "my_op", "--elementwise", "--dir", str(tmp_path), "--force")
    assert forced.returncode == 0, forced.stderr
    assert (tmp_path / "my_op" / "notes.txt").read_text() == "mine"
    assert (tmp_path / "my_op" / "my_op.yaml").exists()


def test_generate_refuses_a_folder_whose_own_files_it_would_overwrite(tmp_path):
    """A project folder (no answers file, no snapshot) whose README.md and setup.py the op would
    also write: nothing is written, and the error names them. Conflict markers used to land in
    the project's own files."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "README.md").write_text("# mine\n")
    (project / "setup.py").write_text("print(1)\n")
    before = tree_snapshot(project)
    result = run_opgen("generate", str(RELU6 / "relu6.yaml"), "--out", str(project))
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "README.md, setup.py already exist and opgen did " \
        "not write them (this is not an op folder)" in result.stderr, result.stderr
    assert tree_snapshot(project) == before


def test_an_out_folder_that_is_a_loop_of_links_is_one_error_line(tmp_path):
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    result = run_opgen("generate", str(RELU6 / "relu6.yaml"), "--out", str(tmp_path / "a"))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "a loop of symbolic links" in result.stderr


def test_a_filesystem_root_is_no_op_folder(tmp_path):
    """`--out /` was taken: the op's files went into / and its lock file was `/..opgen.lock`."""
    for out in ("/", str(tmp_path / ".." / ".." / ".." / ".." / ".." / "..")):
        result = run_opgen("generate", str(RELU6 / "relu6.yaml"), "--out", out, "--pretend")
        assert result.returncode == 2
        assert result.stderr.count("\n") == 1 and "a filesystem root; an op needs a folder of " \
            "its own" in result.stderr, result.stderr


@pytest.mark.skipif(not Path("/proc/self").exists(), reason="needs Linux's /proc")
def test_a_folder_that_takes_no_files_is_refused_before_any_work():
    """generate and new refuse it up front, as init, bench and build --wheel-dir do (exit 2);
    --check and --pretend only read, and are not refused."""
    result = run_opgen("generate", str(RELU6 / "relu6.yaml"), "--out", "/proc/opgen-test")
    assert (result.returncode, result.stderr) == (2, "error: --out /proc/opgen-test: "
                                                     "/proc is not writable\n")
    result = run_opgen("new", "my_op", "--elementwise", "--dir", "/proc")
    assert (result.returncode, result.stderr) == (2, "error: --dir /proc: /proc is not "
                                                     "writable\n")
    result = run_opgen("generate", str(RELU6 / "relu6.yaml"), "--out", "/proc/opgen-test",
                       "--pretend")
    assert result.returncode == 0 and "would    create" in result.stdout


def test_an_existing_op_folder_is_not_probed_for_writing(tmp_path, monkeypatch):
    """An up-to-date op in a read-only folder regenerates as identical (nothing to write); the
    probe is for a folder generate would make."""
    op = tmp_path / "relu6"
    shutil.copytree(RELU6, op, ignore=shutil.ignore_patterns("build"))
    monkeypatch.setattr(writer, "takes_an_entry", lambda folder: False)
    result = api.generate(op / "relu6.yaml")
    assert {c.status for c in result.changes} == {writer.Status.IDENTICAL}
    with pytest.raises(UsageError, match=f"--out {tmp_path / 'new'}: {tmp_path} is not "
                                         "writable"):
        api.generate(op / "relu6.yaml", tmp_path / "new")


@pytest.mark.skipif(not Path("/proc/self").exists(), reason="needs Linux's /proc")
def test_a_lock_file_that_cannot_be_made_is_said_at_once():
    """Where the lock file cannot be created (/proc takes no files), opgen says so at once; it
    used to wait ten minutes for a lock no process held, then blame another opgen."""
    with pytest.raises(WriteError, match="cannot create its lock file"), \
            writer.locked(Path("/proc/opgen-test")):
        pass


@pytest.mark.parametrize("name", ["relu6.py", "README.md", "setup.py"])
def test_a_spec_named_like_a_generated_file_is_refused(tmp_path, name):
    """The spec is never overwritten, so the file of its name used to be left out silently."""
    folder = tmp_path / "op"
    folder.mkdir()
    shutil.copy(RELU6 / "relu6.yaml", folder / name)
    result = run_opgen("generate", str(folder / name))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert f"the spec is named like a file the op is generated into ({name})" in result.stderr
    assert sorted(p.name for p in folder.iterdir()) == [name]


def test_a_damaged_answers_file_is_one_error_line(tmp_path):
    op = tmp_path / "my_op"
    assert run_opgen("new", "my_op", "--elementwise", "--dir", str(tmp_path)).returncode == 0
    (op / ".opgen-answers.yml").write_text("a: " + "[" * 10000 + "\n")
    for command in (["generate", str(op / "my_op.yaml")],
                    ["generate", "--check", str(op / "my_op.yaml")]):
        result = run_opgen(*command)
        assert result.returncode != 0 and result.stderr.count("\n") == 1, result.stderr
        assert "Traceback" not in result.stderr


def test_new_pretend_writes_nothing(tmp_path):
    result = run_opgen("new", "my_op", "--elementwise", "--dir", str(tmp_path), "--pretend")
    assert result.returncode == 0, result.stderr
    assert "my_op.yaml" in result.stdout
    assert list(tmp_path.iterdir()) == []


def test_new_rejects_a_bad_name(tmp_path):
    result = run_opgen("new", "MyOp", "--elementwise", "--dir", str(tmp_path))
    assert result.returncode == 2
    assert result.stderr.startswith("error: ") and "snake_case" in result.stderr
    assert "Traceback" not in result.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args, message", [
    (["generate", "examples/relu6/relu6.yaml", "--bogus"], "No such option: --bogus"),
    (["new", "x_op"], "choose one op kind: --elementwise, --rowwise or --custom"),
    (["generate", "does/not/exist.yaml"], "does/not/exist.yaml: no such spec file"),
    (["build", "does/not/exist"], "does/not/exist: no such op folder"),
    (["test", "examples/relu6", "--device", "tpu"], "--device: expected cpu, gpu or all"),
    (["build", "examples/relu6", "--arch", "ninety"], "--arch: expected compute capabilities"),
    (["generate", "examples/relu6/relu6.yaml", "--check", "--pretend"],
     "--check and --pretend: --check writes nothing already; give one"),
])
def test_wrong_usage_is_one_error_line(args, message):
    result = run_opgen(*args)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("error: ") and message in result.stderr
    assert "Traceback" not in result.stderr


def test_writer_lock_is_exclusive(tmp_path):
    from filelock import FileLock

    dest = tmp_path / "op"
    lock = FileLock(str(tmp_path / ".op.opgen.lock"))
    with lock, pytest.raises(WriteError, match="holds its lock"), writer.locked(dest, timeout=0.2):
        pass


def test_new_force_keeps_the_spec_and_merges_edits(tmp_path):
    """`new --force` over an op of the user's: the spec is never overwritten, and an edited
    generated file is merged with the render of that spec, as `generate` does."""
    assert run_opgen("new", "my_op", "--elementwise", "--dir", str(tmp_path)).returncode == 0
    op = tmp_path / "my_op"
    spec, header = op / "my_op.yaml", op / "csrc" / "my_op.h"
    spec.write_text(spec.read_text().replace("  out: x ", "  out: x * 2 "))
    spec_bytes = spec.read_bytes()
    header.write_text(header.read_text().replace("namespace my_op {\n",
                                                 "namespace my_op {\n\n// tuned by hand\n"))

    result = run_opgen("new", "my_op", "--elementwise", "--dir", str(tmp_path), "--force")

    assert result.returncode == 0, result.stderr
    assert spec.read_bytes() == spec_bytes
    text = header.read_text()
    assert "// tuned by hand\n" in text and "out = x * MT(2);" in text  # edit kept, spec applied
    assert "merged" in result.stdout and "keep" in result.stdout
    assert run_opgen("generate", "--check", "--allow-edits", str(spec)).returncode == 0


def test_new_force_reports_a_conflict_like_generate(tmp_path):
    assert run_opgen("new", "my_op", "--elementwise", "--dir", str(tmp_path)).returncode == 0
    op = tmp_path / "my_op"
    spec, header = op / "my_op.yaml", op / "csrc" / "my_op.h"
    header.write_text(header.read_text().replace("    out = x;\n", "    out = x + MT(1);\n"))
    spec.write_text(spec.read_text().replace("  out: x ", "  out: x * 2 "))

    result = run_opgen("new", "my_op", "--elementwise", "--dir", str(tmp_path), "--force")

    assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr
    assert "merge conflicts (csrc/my_op.h)" in result.stderr
    text = header.read_text()
    assert "<<<<<<< ours\n    out = x + MT(1);\n=======\n    out = x * MT(2);\n" in text
    assert "out: x * 2 " in spec.read_text()


def test_check_accepts_edits_only_in_the_files_the_user_owns(tmp_path):
    """A custom op's kernels and reference.py are the user's: plain --check accepts them edited,
    not stale (spec changed since) nor conflicted, and every other generated file stays strict."""
    api.new("twin", kind="custom", directory=tmp_path)
    op = tmp_path / "twin"
    spec, cpu, reference = op / "twin.yaml", op / "csrc" / "twin_cpu.h", op / "reference.py"
    cpu.write_text(cpu.read_text().replace("  // TODO: your kernel", "  // mine\n  // TODO"))
    reference.write_text(reference.read_text() + "\n# checked by hand\n")
    assert run_opgen("generate", "--check", str(spec)).returncode == 0

    cpu.write_text(cpu.read_text() + "<<<<<<< ours\nx\n=======\ny\n>>>>>>> new render\n")
    result = run_opgen("generate", "--check", str(spec))
    assert result.returncode == 1
    assert "csrc/twin_cpu.h (unresolved merge conflict)" in result.stderr
    cpu.write_text(cpu.read_text().split("<<<<<<<")[0])

    header = op / "csrc" / "twin.h"
    header.write_text(header.read_text() + "// not mine to edit\n")
    result = run_opgen("generate", "--check", str(spec))
    assert result.returncode == 1 and "csrc/twin.h (differs)" in result.stderr
    assert "twin_cpu.h" not in result.stderr and "reference.py" not in result.stderr
    header.write_text(header.read_text().replace("// not mine to edit\n", ""))

    spec.write_text(spec.read_text().replace("(edit me)", "(changed since)"))
    result = run_opgen("generate", "--check", str(spec))
    assert result.returncode == 1 and ".opgen/base/ (" in result.stderr, result.stderr


def test_wrapped_calls_align_after_the_parenthesis_at_their_column():
    from opgen.codegen import wrap_call

    args = [f"argument_{i}" for i in range(12)]
    text = wrap_call("const op::BackwardArgs args", args, ";", indent=2)
    lines = text.split("\n")
    column = 2 + len("const op::BackwardArgs args(")  # where the template puts the first line
    assert len(lines) > 1
    assert all(len(line) - len(line.lstrip()) == column for line in lines[1:])
    assert all(2 + len(lines[0]) <= 100 and len(line) <= 100 for line in lines[1:])
    assert " ".join(text.split()) == f"const op::BackwardArgs args({', '.join(args)});"


@pytest.mark.parametrize("after", [0, 2])
def test_wrapped_items_fit_where_the_template_places_them(after):
    """codegen.wrap_items: what follows the first column and what the template adds after the
    last item (``);``) stay within 100 columns; items are joined by ", " and never split."""
    from opgen.codegen import wrap_items

    items = [f"{{item_{i}, item_{i + 1}}}" for i in range(0, 30, 2)]
    column = len('      bias_gelu::kOpName, "bias_gelu::DoubleBackward", ')
    text = wrap_items(items, column=column, indent=6, after=after)
    lines = text.split("\n")
    assert len(lines) > 2
    assert column + len(lines[0]) <= 100
    assert all(line.startswith(" " * 6) and not line.startswith(" " * 7) for line in lines[1:])
    assert all(len(line) <= 100 for line in lines[1:-1]) and len(lines[-1]) + after <= 100
    assert " ".join(text.split()) == ", ".join(items)
    assert wrap_items(["a", "b"], column=10, indent=6, after=2) == "a, b"


LONG_CPP = ("const MT d2_u = d2_grad_u * grad_out * (MT(0.3989422804014327) * (MT(1) - t * t) * "
            "(MT(1) + MT(0.134145) * (u * u)) + ((MT(0.3989422804014327) * (MT(1) - t * t) - "
            "MT(0.6366197723675814) * u * t * (MT(1) - t * t) * (MT(1) + MT(0.134145) * (u * u))) "
            "* (MT(1) + MT(0.134145) * (u * u)) + MT(0.10703222440890037) * u * (MT(1) - t * t) * "
            "u));")


def test_long_expressions_break_after_operators_at_the_shallowest_depth():
    """codegen.wrap_expression: every line within 100 columns from where the template puts the
    first, continuation lines four deeper, each ending in an operator, the text unchanged but
    for the breaks; the first break is inside the parentheses, since the only ones outside them
    would leave the first line under half full."""
    from opgen.codegen import wrap_expression

    text = wrap_expression(LONG_CPP, indent=4)
    lines = text.split("\n")
    assert len(lines) >= 4
    assert 4 + len(lines[0]) <= 100 and all(len(line) <= 100 for line in lines[1:])
    assert all(line.startswith(" " * 8) and line[8] != " " for line in lines[1:])
    assert all(line.endswith((" *", " +", " -")) for line in lines[:-1])
    assert " ".join(text.split()) == LONG_CPP
    assert lines[0].startswith("const MT d2_u = d2_grad_u * grad_out * (MT(0.3989422804014327)")
    assert wrap_expression("out = x;", indent=4) == "out = x;"
    # no break inside a string literal, and a piece no break shortens stays long
    assert "\n" not in wrap_expression('x = f("' + "a + " * 40 + '");', indent=4)


def test_python_breaks_only_inside_parentheses():
    """codegen.py_assignment and py_return: an expression that must break is put in
    parentheses of its own (unless it is one call already), so the result is Python with the
    same value."""
    from opgen.codegen import py_assignment, py_return

    terms = [f"0.{k}1 * np.power(x, {k}.0)" for k in range(1, 9)]
    statement = py_assignment("out", " + ".join(terms))
    assert statement.startswith("out = (0.11 * np.power(x, 1.0) + ") and statement.endswith(")")
    call = py_assignment("out", "np.where(x > 0, " + ", ".join(terms[:6]) + ")")
    assert call.startswith("out = np.where(x > 0, ") and "out = (" not in call
    returned = py_return([f"ot.sum_to(grad_{n}, np.shape({n}), shape)" for n in "xyzw"])
    assert returned.startswith("return (ot.sum_to(grad_x, ")
    for text in (statement, call, returned):
        assert all(4 + len(line) <= 100 for line in text.split("\n"))
    x = np.linspace(0.5, 2.0, 5)
    scope = {"np": np, "x": x}
    exec(compile(textwrap.dedent(statement.replace("\n    ", "\n")), "<wrapped>", "exec"),
         scope)
    np.testing.assert_array_equal(scope["out"], eval(" + ".join(terms), {"np": np, "x": x}))


def test_formula_comments_wrap_like_the_code():
    from opgen.codegen import comment_lines

    lines = comment_lines("d2_u = " + " + ".join(f"0.{k} * (1 - tanh_u ** 2)" for k in range(12)))
    assert len(lines) > 1 and all(len(line) <= 100 for line in lines)
    assert lines[0].startswith("// d2_u = 0.0 * ") and all(
        line.startswith("//     ") and line[7] != " " for line in lines[1:])


def test_the_examples_wrappers_read_as_hand_written_python():
    """The generated wrappers pass the repository's ruff rules (100 columns, no nested ifs to
    merge, no unused imports), as code written by hand here does."""
    import importlib.util
    import subprocess
    import sys

    if importlib.util.find_spec("ruff") is None:
        pytest.skip("ruff is not installed")
    examples = RELU6.parent
    wrappers = sorted(str(d / f"{d.name}.py") for d in examples.iterdir()
                      if (d / f"{d.name}.py").is_file())
    assert len(wrappers) >= 7
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", *wrappers],
                            capture_output=True, text=True, cwd=examples.parent)
    assert result.returncode == 0, result.stdout + result.stderr
    # Every generated Python file of the examples (tests, setup.py, references too) with the
    # same rules but import order (ruff cannot tell the op's own module from a third party's
    # there), and the blank-line rules ruff still has in preview (two around a function).
    generated = sorted(str(p) for p in examples.glob("*/*.py"))
    for rules in (["--select", "E,F,W,UP,B,SIM"], ["--preview", "--select", "E3"]):
        result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache",
                                 "--isolated", "--line-length", "100", "--target-version",
                                 "py310", *rules, *generated],
                                capture_output=True, text=True, cwd=examples.parent)
        assert result.returncode == 0, result.stdout + result.stderr


# -- 100 columns ---------------------------------------------------------------------------------
# The repository's lines are at most 100 columns, and so are the ops opgen writes, for an op name
# of 24 characters and input and output names of 12 (attrs' too, here). The spec's summary is one
# line, as written, and the backward stub's message one C++ literal (tests/test_escaping.py): the
# specs below have a backward and summaries that fit.

LONG_OP = "fused_residual_layernorm"
SPECS = Path(__file__).resolve().parent / "specs"
LONG_NAMED = {
    "elementwise-inplace-broadcast": f"""\
        name: {LONG_OP}
        kind: elementwise
        summary: Leaky ReLU of a hidden state plus a bias, and where the sum is positive
        inputs: [hidden_state, bias_per_col]
        outputs: [output_value, passing_mask]
        attrs:
          leaky_slope1: {{type: float, default: 0.0}}
          mode_setting: {{type: str, default: fast}}
        forward:
          u: hidden_state + bias_per_col
          output_value: where(u > 0, u, leaky_slope1 * u)
          passing_mask: where(u > 0, 1, 0)
        backward:
          hidden_state: grad_output_value * where(u > 0, 1, leaky_slope1)
          bias_per_col: grad_output_value * where(u > 0, 1, leaky_slope1)
        inplace: {{hidden_state: output_value}}
        amp: autocast
        """,
    "elementwise-double-backward": f"""\
        name: {LONG_OP}
        kind: elementwise
        inputs: [hidden_state, bias_per_col, scale_factor]
        outputs: [output_value]
        forward:
          output_value: tanh(hidden_state + bias_per_col) * scale_factor
        backward: auto
        inplace: {{hidden_state: output_value}}
        amp: float32
        """,
    "rowwise-roles": f"""\
        name: {LONG_OP}
        kind: rowwise
        summary: h = x + residual, then out = rms_norm(h) * weight over the last axis
        inputs: {{hidden_state: element, residual_sum: element, column_scale: column,
                  row_shifting: row}}
        outputs: [output_value, hidden_saved, inverse_rstd]
        attrs:
          epsilon_bits: {{type: float, default: 1.0e-6}}
        forward:
          hidden_saved: hidden_state + residual_sum
          inverse_rstd: rsqrt(mean(hidden_saved * hidden_saved) + epsilon_bits)
          output_value: hidden_saved * inverse_rstd * column_scale + row_shifting
        backward: auto
        """,
    "custom-optional": f"""\
        name: {LONG_OP}
        kind: custom
        summary: The rows of a table at the ids, with an optional bias added
        inputs:
          lookup_index: {{dtype: [int32, int64], shape: any, range: [0, V], doc: rows to read}}
          weight_table: {{dtype: float types, shape: [V, D]}}
          optional_add: {{dtype: same as weight_table, shape: [D], optional: true}}
        outputs:
          output_value: {{dtype: same as weight_table, shape: "[*lookup_index.shape, D]"}}
        attrs:
          padding_idx1: {{type: int64, default: -1}}
          scale_values: {{type: "float[]", default: [1.0, 2.0]}}
        backward: [weight_table]
        sizes: {{V: 5, D: 3}}
        """,
    "custom-inplace-data-dependent": f"""\
        name: {LONG_OP}
        kind: custom
        inputs:
          hidden_state: {{dtype: float types, shape: [..., D]}}
          mask_to_keep: {{dtype: bool, shape: [..., D], range: [0, 2], doc: hidden_state's shape}}
          optional_add: {{dtype: same as hidden_state, shape: [D], optional: true}}
        outputs:
          output_value: {{dtype: same as hidden_state, shape: "[*hidden_state.shape]"}}
          selected_pos: {{dtype: int64, shape: "[-1, 2]", doc: "each one's row and column"}}
          halved_value: {{dtype: same as hidden_state, shape: "[(1 - D) // 2 + D]"}}
        attrs:
          keep_factor1: {{type: int64, default: 2}}
        backward: [hidden_state]
        inplace: {{hidden_state: output_value}}
        sizes: {{D: 7}}
        """,
}


def _starting_spec(kind: str) -> str:
    """The spec `opgen new LONG_OP --<kind>` writes."""
    import jinja2

    from opgen import kinds
    from opgen.render import templates_root

    template = (templates_root() / kinds.get(kind).starting_spec).read_text()
    return jinja2.Template(template, keep_trailing_newline=True).render(name=LONG_OP)


def _spec_texts() -> dict[str, tuple[str, str]]:
    """id -> (spec text, its op name): each kind's starting spec, the specs above, those of
    tests/specs renamed LONG_OP, and tests/data/masked_select as it is."""
    texts = {f"new-{kind}": (_starting_spec(kind), LONG_OP)
             for kind in ("elementwise", "rowwise", "custom")}
    texts |= {key: (textwrap.dedent(text), LONG_OP) for key, text in LONG_NAMED.items()}
    for spec in sorted(SPECS.glob("*.yaml")):
        texts[spec.stem] = (spec.read_text().replace(f"name: {spec.stem}\n",
                                                     f"name: {LONG_OP}\n"), LONG_OP)
    masked = SPECS.parent / "data" / "masked_select" / "masked_select.yaml"
    texts["masked_select"] = (masked.read_text(), "masked_select")
    return texts


@pytest.mark.parametrize("key", list(_spec_texts()))
def test_generated_sources_stay_within_100_columns_with_long_names(key):
    """Every line of every generated source file (Python, C++, CUDA) is at most 100 columns, for
    each kind, with and without an in-place variant, broadcasting inputs, input roles, optional
    inputs and outputs of data-dependent shapes; the runtime headers copied as they are too."""
    from opgen.render import render_op
    from opgen.spec import loads

    text, name = _spec_texts()[key]
    plan = render_op(loads(text, f"/ops/{name}/{name}.yaml", check_builtins=False))
    sources = {rel: data.decode() for rel, data in plan.files.items()
               if rel.endswith((".py", ".cc", ".cu", ".h", ".cuh"))}
    assert f"{name}.py" in sources and f"csrc/{name}.cc" in sources
    long = [f"{rel}:{k}: {len(line)} columns: {line.strip()[:60]}"
            for rel, source in sorted(sources.items())
            for k, line in enumerate(source.splitlines(), 1) if len(line) > 100]
    assert not long, f"{len(long)} lines over 100 columns:\n" + "\n".join(long)
