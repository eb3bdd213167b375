"""kind: custom: the spec's checks, the generated code, `opgen new --custom`, a user's kernel
edit kept through spec changes, examples/embedding against Paddle's own embedding, in-place
outputs, and outputs sized by the data (-1: tests/data/masked_select, a skeleton's)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from conftest import GPU_PYTHON, ROOT, run_opgen

from opgen import api
from opgen.errors import SpecError
from opgen.kinds.custom import LEAD, FreeDims, free_dims
from opgen.render import render_op
from opgen.spec import loads
from opgen.writer import Status

EMBEDDING = ROOT / "examples" / "embedding"

SPEC = """\
name: lookup
kind: custom
inputs:
  ids: {dtype: [int32, int64]}
  table: {dtype: float types, shape: [V, D]}
outputs:
  out: {dtype: same as table, shape: "[*ids.shape, D]"}
attrs:
  pad: {type: int64, default: -1}
  scales: {type: "float[]", default: [1.0, 2.0]}
backward: [table]
sizes: {V: 5, D: 3}
"""


def _load(text: str):
    return loads(text, "lookup.yaml", check_builtins=False)


# -- the spec -------------------------------------------------------------------------------------

def test_a_custom_spec_loads():
    spec = _load(SPEC)
    custom = spec.kind_data
    assert spec.op_name == "custom_lookup"
    assert custom.dtypes["ids"].choices == ("int32", "int64")
    assert custom.dtypes["out"].same_as == "table"
    assert custom.dims == {"V": ("table", 0), "D": ("table", 1)}
    assert spec.model.attrs["scales"].default == [1.0, 2.0]


def test_the_inputs_dtypes_combine_at_most_256_ways():
    """Every combination is a kernel instantiation and a case of every test: six inputs of nine
    dtypes each wrote 500 MB of sources (eight ran on for minutes)."""
    def spec(count: int, following: int = 0) -> str:
        dtypes = "[float16, bfloat16, float32, float64]"
        inputs = "".join(f"  x{i}: {{dtype: {dtypes}}}\n" for i in range(count))
        inputs += "".join(f"  y{i}: {{dtype: same as x0}}\n" for i in range(following))
        return (f"name: many\nkind: custom\ninputs:\n{inputs}outputs:\n"
                "  out: {dtype: same as x0, shape: \"[*x0.shape]\"}\n")

    assert _load(spec(4)).kind_data.dtypes["x3"].choices == ("float16", "bfloat16", "float32",
                                                             "float64")
    with pytest.raises(SpecError) as info:
        _load(spec(5))
    assert (info.value.line, info.value.message) == (8, (
        "inputs.x4.dtype: the inputs' dtypes combine 1024 ways up to here, more than the 256 "
        "kernels and test cases opgen writes at most; give an input 'same as' another, or "
        "fewer dtypes"))
    assert set(_load(spec(4, following=3)).kind_data.dtypes) >= {"y0", "y1", "y2"}  # add none


@pytest.mark.parametrize(("old", "new", "line", "message"), [
    ("{dtype: [int32, int64]}", "{dtype: [int32, int65]}", 4,
     "inputs.ids.dtype: unknown dtype 'int65'"),
    ("same as table", "same as tabel", 7,
     "outputs.out.dtype: 'same as tabel': 'tabel' is not an input"),
    ('"[*ids.shape, D]"', '"[*ids.shape, E]"', 7,
     "outputs.out.shape: 'E' is not a dim name or an int attr (known: V, D, pad)"),
    ('"[*ids.shape, D]"', '"[*idz.shape, D]"', 7, "outputs.out.shape: 'idz' is not an input"),
    # a range the dtype cannot hold: the tests' values would wrap around
    ("{dtype: [int32, int64]}", "{dtype: int8, range: [0, 1000]}", 4,
     "inputs.ids.range: [0, 1000] holds 999, which int8 does not (int8 holds -128 to 127)"),
    ("{dtype: [int32, int64]}", "{dtype: [uint8, int32], range: [-5, 3]}", 4,
     "inputs.ids.range: [-5, 3] holds -5, which uint8 does not (uint8 holds 0 to 255)"),
    ("{dtype: [int32, int64]}", "{dtype: bool, range: [0, 5]}", 4,
     "inputs.ids.range: [0, 5] holds 4, which bool does not (bool holds 0 to 1)"),
    ('"[*ids.shape, D]"', '"[ids.shape[0] + 1.5]"', 7, "outputs.out.shape: '1.5' is not allowed"),
    ("shape: [V, D]}", "shape: [V, ..., D]}", 5, "'...' (any leading dims) comes first"),
    ("{dtype: float types, shape", "{dtype: float types, shap", 5,
     "unknown key 'shap' in inputs.table; allowed: dtype, shape, range, optional, doc"),
    ("backward: [table]", "backward: [ids]", 11, "backward: 'ids' has no float dtype"),
    ("backward: [table]", "backward: [tabel]", 11, "backward: 'tabel' is not an input"),
    ("sizes: {V: 5, D: 3}", "sizes: {V: 5, W: 3}", 12, "sizes: 'W' names no dim"),
    ("default: [1.0, 2.0]", "default: [1.0, x]", 10, "an item of the list: 'x' is not a float"),
    ("{dtype: same as table", "{dtype: [float32, float64]", 7,
     "outputs.out.dtype: an output has one dtype"),
    # names the generated C++ gives to other things (it did not compile)
    ("  out: {dtype: same", "  args: {dtype: same", 7,
     "output name 'args' is reserved: the generated code uses it"),
    ("  pad: {type: int64", "  ids_dtype: {type: int64", 9,
     "attr name 'ids_dtype' is reserved: the generated C++ names ids's dtype 'ids_dtype'"),
    ("  out: {dtype: same", "  table_shape: {dtype: same", 7,
     "output name 'table_shape' is reserved: the generated C++ names table's shape"),
    # a range over dims, empty at the tests' sizes: numpy's draw failed in every test
    ("{dtype: [int32, int64]}", "{dtype: [int32, int64], range: [V, D]}", 4,
     "inputs.ids.range: [V, D] is empty at the tests' sizes (V = 5, D = 3; sizes: sets them, "
     "7 where it does not)"),
    ("{dtype: [int32, int64]}", "{dtype: [int32, int64], range: [6, V]}", 4,
     "inputs.ids.range: [6, V] is empty at the tests' sizes (V = 5;"),
    ("{dtype: [int32, int64]}", "{dtype: bool, range: [0, V]}", 4,
     "inputs.ids.range: [0, V] holds 4 at the tests' sizes (V = 5), which bool does not"),
    # a dim the tests (DIMS) and the output shapes name: refused where it is declared
    ("shape: [V, D]}", "shape: [V, class]}", 5, "dim name 'class' is a Python keyword"),
    ("shape: [V, D]}", "shape: [V, int]}", 5, "dim name 'int' is a C++ keyword"),
    # lookup.py would shadow a module the op's own files import, as for the other kinds
    ("name: lookup", "name: os", 1, "op name 'os' would shadow the Python module 'os'"),
    ("name: lookup", "name: numpy", 1, "op name 'numpy' would shadow the Python module 'numpy'"),
])
def test_spec_errors_name_the_line(old, new, line, message):
    assert old in SPEC
    with pytest.raises(SpecError) as info:
        _load(SPEC.replace(old, new))
    assert info.value.line == line, str(info.value)
    assert message in str(info.value)


def test_inputs_that_camel_case_alike_get_distinct_type_parameters():
    """`a1` and `a_1` both made `A1T`: `template <typename A1T, typename A1T>` does not
    compile."""
    spec = _load("name: tcol\nkind: custom\ninputs:\n  a1: {dtype: float types}\n"
                 "  a_1: {dtype: [int32, int64]}\n  a__1: {dtype: [int32, int64]}\noutputs:\n"
                 "  out: {dtype: same as a1, shape: \"[*a1.shape]\"}\n")
    files = render_op(spec).files
    assert b"template <typename A1T, typename A1T2, typename A1T3>" in files["csrc/tcol_cpu.h"]
    assert b"using A1T2 = typename decltype(a_1_type)::type;" in files["csrc/tcol.cc"]


def test_elementwise_specs_are_untouched_by_the_custom_schema():
    with pytest.raises(SpecError, match="forward"):
        loads("name: e\nkind: elementwise\ninputs: [x]\noutputs: [out]\n", "e.yaml",
              check_builtins=False)


# -- the generated code ---------------------------------------------------------------------------

def test_generated_code_infers_shapes_and_dispatches_over_the_dtype_product():
    files = render_op(_load(SPEC)).files
    cc = files["csrc/lookup.cc"].decode()
    assert "std::vector<int64_t> out_shape = ids_shape;" in cc
    assert "out_shape.push_back(table_shape[1]);" in cc
    # The declared shapes are checked in C++ before a dim is read: by the kernels' entry (with
    # the devices) and by InferShape, which refuses nothing (Paddle aborts on an exception).
    assert 'opgen::CheckRank("custom_lookup", "table", table_shape, 2, false, "[V, D]");' in cc
    forward = cc[cc.index("std::vector<paddle::Tensor> LookupForward("):]
    assert forward.split("{\n", 1)[1].startswith("  CheckInputs(ids, table);\n")
    assert 'opgen::CheckSamePlace("custom_lookup", "table", table, "ids", ids);' in cc
    infer = cc[cc.index("LookupInferShape("):cc.index("LookupInferDtype(")]
    assert "return opgen::InferShapesOrUnknown(1, [&]() -> " in infer
    assert infer.index("CheckShapes(table_shape);") < infer.index("table_shape[1]")
    assert '.Attrs({"pad: int64_t", "scales: std::vector<float>"})' in cc
    assert ".Outputs({paddle::Grad(\"table\")})" in cc
    header = files["csrc/lookup.h"].decode()
    assert header.count("return f(Tag<") == 2 * 4  # int32/int64 x four float dtypes
    wrapper = files["lookup.py"].decode()
    assert 'raise ValueError(f"lookup: table must have 2 dims [V, D]' in wrapper
    assert "[*ids.shape, table.shape[1]]" in wrapper
    # The user's files say they are the user's.
    assert "This file is yours" in files["csrc/lookup_cpu.h"].decode()
    assert "raise NotImplementedError" in files["reference.py"].decode()


@pytest.mark.parametrize(("ids", "table", "wrong"), [
    ("[int32, int64]", "float types", ("ids", "int16")),
    # ids takes every dtype the first choices name: the next one it refuses
    ("[int16, int32, float32, float64]", "float types", ("ids", "int8")),
    # ids takes every dtype: table (a dtype rule of its own) is given one it refuses
    ("[bool, int8, uint8, int16, int32, int64, float16, bfloat16, float32, float64]",
     "[float32, float64]", ("table", "int16")),
    # nothing to refuse: no such test (rendering it used to stop on a StopIteration)
    ("[bool, int8, uint8, int16, int32, int64, float16, bfloat16, float32, float64]",
     "[bool, int8, uint8, int16, int32, int64, float16, bfloat16, float32, float64]", None),
])
def test_the_wrong_dtype_test_gives_an_input_a_dtype_it_refuses(ids, table, wrong):
    spec = SPEC.replace("ids: {dtype: [int32, int64]}", f"ids: {{dtype: {ids}}}")
    spec = spec.replace("{dtype: float types, shape: [V, D]}", f"{{dtype: {table}, shape: [V, D]}}")
    spec = spec.replace("backward: [table]\n", "")
    test = render_op(_load(spec)).files["test_lookup.py"].decode()
    if wrong is None:
        assert "def test_wrong_dtype_is_a_clear_error" not in test
        return
    name, dtype = wrong
    assert f'tensors["{name}"] = ot.to_paddle(np.zeros(tensors["{name}"].shape), "{dtype}", ' \
        'device)' in test
    assert f'with pytest.raises(TypeError, match="lookup: {name} is {dtype}"):' in test


def test_shared_dims_are_checked_across_inputs():
    spec = SPEC.replace("ids: {dtype: [int32, int64]}", "ids: {dtype: [int32, int64], "
                        "shape: [..., D]}")
    wrapper = render_op(_load(spec)).files["lookup.py"].decode()
    assert "table.shape[1] != ids.shape[-1]" in wrapper
    assert "table.shape[1] (D) is {table.shape[1]} but ids.shape[-1] (D)" in wrapper
    # A static graph's variables: a dim not known yet (-1) agrees with any.
    assert "-1 not in (table.shape[1], ids.shape[-1]) and table.shape[1] != ids.shape[-1]" \
        in wrapper
    cc = " ".join(render_op(_load(spec)).files["csrc/lookup.cc"].decode().split())
    assert 'opgen::CheckRank("custom_lookup", "ids", ids_shape, 1, true, "[..., D]");' in cc
    assert ('opgen::CheckSameDim("custom_lookup", "D", "table.shape[1]", table_shape[1], '
            '"ids.shape[-1]", ids_shape.end()[-1]);') in cc


# -- opgen new --custom, and edits through spec changes ------------------------------------------

def test_new_custom_scaffolds_the_users_files(tmp_path):
    result = run_opgen("new", "twin", "--custom", "--dir", str(tmp_path))
    assert result.returncode == 0, result.stderr
    op = tmp_path / "twin"
    for rel in ("twin.yaml", "csrc/twin_cpu.h", "csrc/twin_cuda.cuh", "reference.py",
                "csrc/twin.cc", "csrc/twin.cu", "twin.py", "test_twin.py"):
        assert (op / rel).is_file(), rel
    assert "std::copy_n(args.x.data<XT>()" in (op / "csrc/twin_cpu.h").read_text()


def test_new_needs_exactly_one_kind(tmp_path):
    result = run_opgen("new", "twin", "--custom", "--elementwise", "--dir", str(tmp_path))
    assert result.returncode != 0
    assert "choose one op kind" in result.stdout + result.stderr
    assert not (tmp_path / "twin").exists()


USER_LOOP = """\
  // my own loop
  const XT* from = args.x.data<XT>();
  XT* to = args.out.data<XT>();
  for (int64_t i = 0; i < args.x.numel(); ++i) to[i] = from[i];
"""


def _edit_forward(path: Path) -> None:
    text = path.read_text()
    skeleton = "  std::copy_n(args.x.data<XT>(), args.x.numel(), args.out.data<XT>());\n"
    assert text.count(skeleton) == 1
    path.write_text(text.replace(skeleton, USER_LOOP, 1))


SPEC_CHANGES = [
    # an attr: every kernel's argument comment grows a line, merged around the edit
    ("# attrs:                    # bool, int, int64, float, str, int[], int64[], float[], with "
     "a default\n#   axis: {type: int, default: -1}",
     "attrs:\n  scale: {type: float, default: 2.0}", Status.MERGED),
    # fewer dtypes: the dispatch changes, and the kernels' comment naming XT's types
    ("x: {dtype: float types,", "x: {dtype: [float32, float64],", Status.MERGED),
    # a vector attr
    ("  scale: {type: float, default: 2.0}",
     "  scale: {type: float, default: 2.0}\n  steps: {type: \"int[]\", default: [1, 2]}",
     Status.MERGED),
]


@pytest.mark.build
def test_a_kernel_edit_survives_three_spec_changes(tmp_path):
    api.new("twin", kind="custom", directory=tmp_path)
    op = tmp_path / "twin"
    spec = op / "twin.yaml"
    _edit_forward(op / "csrc/twin_cpu.h")
    for old, new, status in SPEC_CHANGES:
        text = spec.read_text()
        assert old in text, old
        spec.write_text(text.replace(old, new))
        result = api.generate(spec)
        statuses = {c.path: c.status for c in result.changes}
        assert statuses["csrc/twin_cpu.h"] is status, statuses
        assert statuses["csrc/twin.h"] is Status.OVERWRITE, statuses
        assert not result.conflicts
        cpu = (op / "csrc/twin_cpu.h").read_text()
        assert USER_LOOP in cpu
    assert "//   args.scale: float attr" in cpu and "//   args.steps: int[] attr" in cpu
    assert "float16" not in (op / "csrc/twin.h").read_text()
    assert "//   XT: float or double" in cpu
    tested = run_opgen("test", str(op), "--device", "cpu", "--", "-q", "-p", "no:warnings")
    assert tested.returncode == 0, tested.stdout[-3000:] + tested.stderr[-2000:]


def test_generate_says_which_edited_files_to_check(tmp_path):
    api.new("twin", kind="custom", directory=tmp_path)
    op = tmp_path / "twin"
    _edit_forward(op / "csrc/twin_cpu.h")
    old, new, _ = SPEC_CHANGES[0]
    spec = op / "twin.yaml"
    spec.write_text(spec.read_text().replace(old, new))
    result = run_opgen("generate", str(spec))
    assert result.returncode == 0, result.stderr
    assert "merged" in result.stdout
    assert "note: your edits to csrc/twin_cpu.h, csrc/twin_cuda.cuh were merged" not in \
        result.stdout  # the CUDA file was not edited: it takes the new render
    assert "note: your edits to csrc/twin_cpu.h were merged with the new render" in \
        " ".join(result.stdout.split())


@pytest.mark.build
def test_new_custom_builds_and_passes_its_tests_unchanged(tmp_path):
    assert run_opgen("new", "twin", "--custom", "--dir", str(tmp_path)).returncode == 0
    result = run_opgen("test", str(tmp_path / "twin"), "--device", "cpu", "--", "-q", "-p",
                       "no:warnings")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and " failed" not in result.stdout


@pytest.mark.build
def test_a_forward_only_custom_op_passes_its_to_static_and_saved_model_tests(tmp_path):
    """Without backward: no gradient op is registered; eager marks the outputs stop_gradient,
    and a to_static program that trains failed to build ("has no grad op") until the wrapper
    marked them in static graphs too."""
    assert run_opgen("new", "fwd", "--custom", "--dir", str(tmp_path)).returncode == 0
    spec = tmp_path / "fwd" / "fwd.yaml"
    text = spec.read_text()
    assert "\nbackward: [x]" in text
    spec.write_text(text.replace("\nbackward: [x]", "\n# backward: [x]"))
    api.generate(spec)
    assert "out.stop_gradient = True" in (spec.parent / "fwd.py").read_text()
    result = run_opgen("test", str(spec.parent), "--device", "cpu", "--", "-q", "-p",
                       "no:warnings", "-k", "static or saved or forward")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and " failed" not in result.stdout


def test_a_missing_reference_fails_the_tests_saying_so(tmp_path):
    spec = tmp_path / "lookup" / "lookup.yaml"
    spec.parent.mkdir()
    spec.write_text(SPEC)
    api.generate(spec)
    reference = (spec.parent / "reference.py").read_text()
    assert 'raise NotImplementedError("reference.py: write out() for lookup\'s tests")' \
        in reference


# -- examples/embedding ---------------------------------------------------------------------------

def test_embedding_example_is_current():
    result = run_opgen("generate", str(EMBEDDING / "embedding.yaml"), "--check")
    assert result.returncode == 0, result.stdout + result.stderr


PADDLE_COMPARISON = textwrap.dedent("""
    import sys
    import numpy as np, paddle, opgen
    import paddle.nn.functional as F
    op = opgen.load(sys.argv[1]).embedding
    rng = np.random.default_rng(0)
    table_np = rng.standard_normal((40, 16)).astype("float32")
    ids_np = rng.integers(0, 40, size=(7, 300))  # each id about 50 times
    for dtype in ("int32", "int64"):
        for pad in (-1, 3):
            ids = paddle.to_tensor(ids_np.astype(dtype))
            mine = paddle.to_tensor(table_np, stop_gradient=False)
            theirs = paddle.to_tensor(table_np, stop_gradient=False)
            out = op(ids, mine, padding_idx=pad)
            want = F.embedding(ids, theirs, padding_idx=None if pad < 0 else pad)
            np.testing.assert_array_equal(out.numpy(), want.numpy())
            grad = paddle.to_tensor(rng.standard_normal(out.shape).astype("float32"))
            (g_mine,) = paddle.grad([out], [mine], grad_outputs=[grad])
            (g_theirs,) = paddle.grad([want], [theirs], grad_outputs=[grad])
            np.testing.assert_allclose(g_mine.numpy(), g_theirs.numpy(), rtol=1e-5, atol=1e-5)
    bad = paddle.to_tensor(np.array([1, 2, 40, 3]))
    try:
        op(bad, paddle.to_tensor(table_np))
    except Exception as exc:
        assert "ids holds 40 (at flat index 2), outside the table's rows [0, 40)" in str(exc), exc
    else:
        raise AssertionError("an out-of-range id was not refused")
    unchecked = op(bad, paddle.to_tensor(table_np), check_ids=False).numpy()
    np.testing.assert_array_equal(unchecked[[0, 1, 3]], table_np[[1, 2, 3]])
    np.testing.assert_array_equal(unchecked[2], np.zeros(16, np.float32))
    try:
        op(paddle.to_tensor(np.array([1])), paddle.to_tensor(table_np), padding_idx=-2)
    except Exception as exc:
        assert "padding_idx is -2; it must be -1 (none) or a row" in str(exc), exc
    else:
        raise AssertionError("padding_idx -2 was not refused")
    print("ok")
""")


@pytest.mark.build
def test_embedding_matches_paddle_forward_and_table_gradient():
    """Against paddle.nn.functional.embedding on the CPU (in a process of its own: Paddle aborts
    when a second library registers custom_embedding), with out-of-range ids a clear error."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GLOG_minloglevel": "3"}
    result = subprocess.run([sys.executable, "-c", PADDLE_COMPARISON, str(EMBEDDING)],
                            capture_output=True, text=True, env=env, check=False)
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), \
        result.stdout[-2000:] + result.stderr[-3000:]


BAD_SHAPES = textwrap.dedent("""
    import sys
    import numpy as np
    import paddle
    sys.path.insert(0, sys.argv[1])
    import embedding as op

    ids, flat = paddle.to_tensor(np.arange(4)), paddle.ones([50])
    message = "table must have 2 dims [V, D], got shape [50]"
    for call in (lambda: op.embedding(ids, flat),
                 lambda: op._ops().custom_embedding(ids, flat, -1, False, True)):
        try:
            call()
        except Exception as exc:  # the wrapper's ValueError, or the raw op's from CheckInputs
            assert message in str(exc), exc
        else:
            raise AssertionError("a 1-d table was not refused")

    # An empty result runs no kernel, but its inputs are refused as a kernel's would be (on
    # Paddle 3 by the .cc's entry point, which the wrapper leaves it to), and its gradient is 0.
    empty, wrong = paddle.to_tensor(np.zeros([0], "int64")), paddle.ones([50, 3], "int32")
    for call in (lambda: op.embedding(empty, wrong),
                 lambda: op._ops().custom_embedding(empty, wrong, -1, False, True)):
        try:
            call()
        except Exception as exc:
            assert "int32" in str(exc), exc
        else:
            raise AssertionError("an int32 table was taken for an empty result")
    table = paddle.ones([50, 3])
    table.stop_gradient = False
    out = op.embedding(empty, table)
    assert list(out.shape) == [0, 3], out.shape
    if not paddle.__version__.startswith("2."):
        (grad,) = paddle.grad([out], [table], grad_outputs=[paddle.ones([0, 3])])
        assert list(grad.shape) == [50, 3] and not grad.numpy().any(), grad

    paddle.enable_static()
    try:  # an eager tensor in static mode: Paddle's static API would abort the process
        op.embedding(ids, paddle.ones([50, 3]))
    except TypeError as exc:
        assert "ids is an eager paddle.Tensor, but Paddle is in static mode" in str(exc), exc
    else:
        raise AssertionError("an eager tensor was taken in static mode")
    with paddle.static.program_guard(paddle.static.Program()):
        ids_var = paddle.static.data("ids", [4], "int64")
        flat_var = paddle.static.data("flat", [50], "float32")
        try:
            op.embedding(ids_var, flat_var)
        except ValueError as exc:
            assert message in str(exc), exc
        else:
            raise AssertionError("the wrapper built a program with a 1-d table")
    # The raw op: InferShape refuses nothing (Paddle would abort), its shape is not known, and
    # the kernels refuse the table when the program runs.
    program = paddle.static.Program()
    with paddle.static.program_guard(program):
        ids_var = paddle.static.data("ids", [4], "int64")
        flat_var = paddle.static.data("flat", [50], "float32")
        out = op._ops().custom_embedding(ids_var, flat_var, -1, False, True)
        assert list(out.shape) == [-1], out.shape
    executor = paddle.static.Executor(paddle.CPUPlace())
    try:
        executor.run(program, feed={"ids": np.arange(4), "flat": np.ones(50, "float32")},
                     fetch_list=[out])
    except Exception as exc:  # the kernels' own message (Paddle 3 keeps it: opgen/error.h)
        assert message in str(exc), exc
    else:
        raise AssertionError("the program ran with a 1-d table")
    print("ok")
""")


@pytest.mark.build
def test_embedding_refuses_a_table_of_the_wrong_rank_on_every_path():
    """The C++ checks (CheckInputs, CheckShapes) stand where the wrapper's do not: the raw op
    and a static graph refuse a 1-d table without reading past its shape, and nothing aborts."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GLOG_minloglevel": "3"}
    result = subprocess.run([sys.executable, "-c", BAD_SHAPES, str(EMBEDDING)],
                            capture_output=True, text=True, env=env, check=False)
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), \
        result.stdout[-2000:] + result.stderr[-3000:]


@pytest.mark.build
@pytest.mark.gpu_env
def test_embedding_cuda_sources_compile_and_link():
    if not GPU_PYTHON.exists():
        pytest.skip("no .venv-gpu (paddlepaddle-gpu 2.6.2): run scripts/setup.sh")
    result = run_opgen("build", str(EMBEDDING), "--arch", "90", python=GPU_PYTHON,
                       env={"CUDA_HOME": os.environ.get("CUDA_HOME", "/usr/local/cuda")})
    assert result.returncode == 0, result.stderr[-3000:]
    assert "CPU + CUDA sm_90" in result.stdout


def test_reference_matches_numpy_indexing():
    """The example's reference is what the tests trust: checked against plain indexing."""
    sys.path.insert(0, str(EMBEDDING))
    try:
        import reference  # type: ignore[import-not-found]
    finally:
        sys.path.pop(0)
    table = np.arange(12.0).reshape(4, 3)
    ids = np.array([[0, 3], [3, 1]])
    np.testing.assert_array_equal(reference.out(ids, table, padding_idx=1),
                                  [[table[0], table[3]], [table[3], np.zeros(3)]])
    grad = reference.grad_table(ids, table, np.ones((2, 2, 3)), padding_idx=0)
    np.testing.assert_array_equal(grad, [[0, 0, 0], [1, 1, 1], [0, 0, 0], [2, 2, 2]])


def test_bench_refuses_a_custom_op_clearly():
    result = run_opgen("bench", str(EMBEDDING))
    assert result.returncode != 0
    assert ("opgen bench times elementwise and rowwise ops; a custom op's kernels are yours to "
            "time") in " ".join(result.stderr.split())


# -- optional inputs ------------------------------------------------------------------------------

SHIFT = """\
name: shift
kind: custom
inputs:
  x: {dtype: float types, shape: [..., D]}
  bias: {dtype: same as x, shape: [D], optional: true}
outputs:
  out: {dtype: same as x, shape: "[*x.shape]"}
backward: [x]
sizes: {D: 6}
"""


@pytest.mark.parametrize(("old", "new", "line", "message"), [
    ("x: {dtype: float types, shape: [..., D]}", "x: {dtype: float types, shape: [..., D], "
     "optional: true}", 4, "the first input is required"),
    ("dtype: same as x, shape: [D], optional", "dtype: [float32, float64], shape: [D], optional",
     5, "an optional input has one dtype or 'same as <required input>'"),
    ("backward: [x]", "backward: [x, bias]", 8, "'bias' is optional; optional inputs get no "
     "gradient"),
    ('"[*x.shape]"', '"[*bias.shape]"', 7, "'bias' is optional; an output's shape reads "
     "required inputs"),
    ("shape: [D], optional", "shape: [E], optional", 5, "dim 'E' is named first by an optional "
     "input"),
])
def test_optional_input_errors(old, new, line, message):
    assert old in SHIFT
    with pytest.raises(SpecError) as info:
        loads(SHIFT.replace(old, new), "shift.yaml", check_builtins=False)
    assert info.value.line == line, str(info.value)
    assert message in str(info.value)


def test_optional_inputs_are_paddle_optional():
    files = render_op(loads(SHIFT, "shift.yaml", check_builtins=False)).files
    cc = files["csrc/shift.cc"].decode()
    assert '.Inputs({"x", paddle::Optional("bias")})' in cc
    assert "const paddle::optional<paddle::Tensor>& bias" in cc
    assert "const paddle::optional<std::vector<int64_t>>& bias_shape" in cc
    # Checked where given: its shape in CheckShapes, its dtype and device in CheckInputs.
    assert "  if (bias_shape) {\n    opgen::CheckRank(\"custom_shift\", \"bias\", *bias_shape" in cc
    assert "CheckShapes(x.shape(), opgen::ShapeOf(bias));\n  if (bias) {\n" in cc
    wrapper = files["shift.py"].decode()
    assert "def shift(x: paddle.Tensor, bias: paddle.Tensor | None = None)" in wrapper
    assert "if bias is not None and (bias.shape[0] != x.shape[-1]):" in wrapper
    assert "def out(x, bias=None):" in files["reference.py"].decode()


@pytest.mark.build
def test_an_optional_input_reaches_the_kernel_given_and_omitted(tmp_path):
    spec = tmp_path / "shift" / "shift.yaml"
    spec.parent.mkdir()
    spec.write_text(SHIFT)
    api.generate(spec)
    cpu = spec.parent / "csrc" / "shift_cpu.h"
    skeleton = "  std::copy_n(args.x.data<XT>(), args.x.numel(), args.out.data<XT>());\n"
    kernel = """\
  const int64_t d = args.x.shape().back();
  const XT* x = args.x.data<XT>();
  XT* out = args.out.data<XT>();
  for (int64_t i = 0; i < args.x.numel(); ++i) {
    const double b = args.bias ? static_cast<double>(args.bias->data<XT>()[i % d]) : 0.0;
    out[i] = static_cast<XT>(static_cast<double>(x[i]) + b);
  }
"""
    assert cpu.read_text().count(skeleton) == 1  # the forward (the backward copies grad_out)
    cpu.write_text(cpu.read_text().replace(skeleton, kernel, 1))
    reference = spec.parent / "reference.py"
    reference.write_text(reference.read_text().replace(
        "    return np.array(x, dtype=np.float64)", "    return x if bias is None else x + bias"))
    result = run_opgen("test", str(spec.parent), "--device", "cpu", "--", "-q", "-p",
                       "no:warnings")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert " passed" in result.stdout


@pytest.mark.build
def test_embedding_passes_its_generated_tests():
    result = run_opgen("test", str(EMBEDDING), "--device", "cpu", "--", "-q", "-p",
                       "no:warnings")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and " failed" not in result.stdout


# -- the deploy tests' free dims: None in their InputSpecs ----------------------------------------

ROWS = """\
name: rows
kind: custom
inputs:
  x: {dtype: float types, shape: [N, D]}
  weight: {dtype: same as x, shape: [N]}
outputs:
  out: {dtype: same as x, shape: "[*x.shape]"}
backward: [x]
sizes: {N: 4, D: 3}
"""
# No dim free: N and the leading dims are computed with, D is not first.
GROW = """\
name: grow
kind: custom
inputs:
  x: {dtype: float32, shape: [N, D]}
  ids: {dtype: int64}
outputs:
  out: {dtype: same as x, shape: "[N + 1, D]"}
  picked: {dtype: same as x, shape: "[ids.shape[0] * 2]"}
"""


@pytest.mark.parametrize(("text", "lead", "names", "fixed"), [
    ((EMBEDDING / "embedding.yaml").read_text(), True, (),
     {"V": "it bounds the values of ids: its range", "D": "table has it as dim 1, not first"}),
    (SHIFT, True, (), {"D": "x has it after '...', not first"}),
    (ROWS, False, ("N",), {"D": "x has it as dim 1, not first"}),
    (GROW, False, (), {LEAD: "an output's shape computes with one: picked [ids.shape[0] * 2]",
                       "N": "an output's shape computes with it: out [N + 1, D]",
                       "D": "x has it as dim 1, not first"}),
], ids=["embedding", "shift", "rows", "grow"])
def test_free_dims_follow_the_spec(text, lead, names, fixed):
    spec = loads(text, "op.yaml", check_builtins=False)
    assert free_dims(spec.model, spec.kind_data) == FreeDims(lead, names, fixed)


# Imports each generated test module (the op's library loads at its first call, so nothing is
# built) and prints its deploy InputSpecs' shapes and the inputs it serves at other sizes.
DEPLOY_SHAPES = textwrap.dedent("""
    import importlib, json, sys
    shapes = {}
    for folder in sys.argv[1:]:
        sys.path.insert(0, folder)
        name = folder.rsplit("/", 1)[-1]
        test = importlib.import_module(f"test_{name}")
        sys.path.pop(0)
        _, specs = test.deploy_inputs()
        other, _ = test.deploy_inputs(other=True)
        shapes[name] = [[list(s.shape) for s in specs],
                        [list(t.shape) for t in other.values()]]
    print(json.dumps(shapes))
""")


def test_deploy_input_specs_have_none_for_the_free_dims(tmp_path):
    """The InputSpecs the generated deploy tests trace with (-1: None), and the inputs of other
    sizes their saved model serves: every free dim 2 larger; none where no dim is free."""
    folders = [str(EMBEDDING)]
    for name, text in (("rows", ROWS), ("grow", GROW)):
        (tmp_path / name).mkdir()
        (tmp_path / name / f"{name}.yaml").write_text(text)
        api.generate(tmp_path / name / f"{name}.yaml")
        folders.append(str(tmp_path / name))
    env = {**os.environ, "GLOG_minloglevel": "3", "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-c", DEPLOY_SHAPES, *folders], capture_output=True,
                            text=True, env=env, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == {
        "embedding": [[[-1, -1], [50, 12]], [[5, 7], [50, 12]]],  # ids: any shape
        "rows": [[[-1, 3], [-1]], [[6, 3], [6]]],                 # N, first in x and weight
        "grow": [[[7, 7], [3, 5]], [[7, 7], [3, 5]]],             # none: the test shapes
    }
    grow = (tmp_path / "grow" / "test_grow.py").read_text()
    assert "# The spec leaves no dim free (docs/deploy.md, section 6)" in grow
    assert "FREE_LEAD = False" in grow and "FREE_DIMS = []" in grow
    assert "other=deploy_inputs(other=True)" not in grow  # it serves the traced shapes alone
    assert "FREE_DIMS = ['N']" in (tmp_path / "rows" / "test_rows.py").read_text()


@pytest.mark.build
def test_a_named_batch_dim_is_free_in_the_deploy_tests(tmp_path):
    """A skeleton whose inputs share a leading named dim N: its generated tests pass unchanged,
    the deploy tests tracing with N None and serving N + 2."""
    spec = tmp_path / "rows" / "rows.yaml"
    spec.parent.mkdir()
    spec.write_text(ROWS)
    api.generate(spec)
    result = run_opgen("test", str(spec.parent), "--device", "cpu", "--", "-q", "-p",
                       "no:warnings")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and " failed" not in result.stdout


# -- in-place outputs -----------------------------------------------------------------------------

SHIFT_ = SHIFT + "inplace: {x: out}\n"


@pytest.mark.parametrize(("old", "new", "line", "message"), [
    ("inplace: {x: out}", "inplace: {y: out}", 10,
     "inplace: 'y' is not an input (inputs: x, bias)"),
    ("inplace: {x: out}", "inplace: {x: norm}", 10, "inplace: 'norm' is not an output"),
    ("inplace: {x: out}", "inplace: {bias: out}", 10, "inplace: 'bias' is optional"),
    ('"[*x.shape]"', '"[*x.shape, 1]"', 10, "inplace: out's shape [*x.shape, 1] is not x's"),
    ("out: {dtype: same as x", "out: {dtype: float32", 10, "inplace: out is float32 but x is "
     "float32, float64, float16 or bfloat16; an output written over x has its dtype"),
    ("inplace: {x: out}", "inplace: {}", 10, "inplace: an empty map"),
])
def test_inplace_errors(old, new, line, message):
    assert old in SHIFT_
    with pytest.raises(SpecError) as info:
        loads(SHIFT_.replace(old, new), "shift.yaml", check_builtins=False)
    assert info.value.line == line, str(info.value)
    assert message in str(info.value)


def test_an_output_of_the_inputs_dims_one_by_one_may_be_in_place():
    spec = SPEC.replace("backward: [table]", "backward: [table]\ninplace: {table: out}")
    with pytest.raises(SpecError, match="out's shape"):
        _load(spec)  # [*ids.shape, D] is not table's [V, D]
    _load(spec.replace('"[*ids.shape, D]"', '"[V, table.shape[-1]]"'))
    twice = SPEC.replace("  ids: {dtype: [int32, int64]}", "  ids: {dtype: same as table, "
                         "shape: [V, D]}") + "inplace: {table: out, ids: out}\n"
    twice = twice.replace('"[*ids.shape, D]"', '"[*table.shape]"')
    with pytest.raises(SpecError, match="'out' is already written over 'table'; one output per "
                       "input"):
        _load(twice)


def test_inplace_registers_its_own_op_with_set_inplace_map():
    files = render_op(loads(SHIFT_, "shift.yaml", check_builtins=False)).files
    cc = files["csrc/shift.cc"].decode()
    assert "void ShiftForwardInPlace(paddle::Tensor& x, const paddle::optional<paddle::Tensor>& " \
        "bias) {" in cc
    assert "const shift::ForwardArgs args{x, bias, x};" in cc
    assert ('PD_BUILD_OP(custom_shift_inplace)\n    .Inputs({"x", paddle::Optional("bias")})\n'
            '    .Outputs({"out"})\n    .SetInplaceMap({{"x", "out"}})\n'
            "    .SetKernelFn(PD_KERNEL(ShiftForwardInPlace));  // its outputs are its inputs: "
            "no inference\n") in cc
    assert "PD_BUILD_GRAD_OP(custom_shift_inplace)" not in cc  # its backward would read x
    cpu = files["csrc/shift_cpu.h"].decode()
    assert "if (args.out.data<XT>() != args.x.data<XT>()) {  // shift_(): the same tensor" in cpu
    wrapper = files["shift.py"].decode()
    assert '__all__ = ["shift", "shift_"]' in wrapper
    assert "def shift_(x: paddle.Tensor, bias: paddle.Tensor | None = None) -> paddle.Tensor:" \
        in wrapper
    assert "from shift import shift, shift_" in files["test_shift.py"].decode()
    plain = render_op(loads(SHIFT, "shift.yaml", check_builtins=False)).files
    assert "SetInplaceMap" not in plain["csrc/shift.cc"].decode()
    assert "def shift_" not in plain["shift.py"].decode()


INPLACE_RUN = textwrap.dedent("""
    import sys
    import numpy as np
    import paddle
    sys.path.insert(0, sys.argv[1])
    from shift import shift, shift_

    x = paddle.to_tensor(np.arange(12.0).reshape(2, 6), dtype="float32")
    bias = paddle.full([6], 0.5, "float32")
    want = shift(x, bias).numpy()
    address = x.data_ptr()
    out = shift_(x, bias)
    assert out.data_ptr() == address == x.data_ptr(), "not in x's memory"
    np.testing.assert_array_equal(x.numpy(), want)
    np.testing.assert_array_equal(out.numpy(), want)
    leaf = paddle.ones([2, 6], "float32")
    leaf.stop_gradient = False
    try:
        shift_(leaf, bias)
    except ValueError as exc:
        assert "shift_: x is a leaf tensor that requires a gradient" in str(exc), exc
    else:
        raise AssertionError("a leaf that requires a gradient was overwritten")
    try:
        shift_(leaf * 2, bias)
    except RuntimeError as exc:
        assert "the backward of shift reads its inputs" in str(exc), exc
    else:
        raise AssertionError("shift_ took an input that requires a gradient")
    paddle.enable_static()  # the same refusal in a static graph, where Paddle built the program
    with paddle.static.program_guard(paddle.static.Program()):
        sx = paddle.static.data("x", [2, 6], "float32")
        sx.stop_gradient = False
        try:
            shift_(sx, paddle.static.data("bias", [6], "float32"))
        except RuntimeError as exc:
            assert "the backward of shift reads its inputs" in str(exc), exc
        else:
            raise AssertionError("shift_ took a static input that requires a gradient")
    program = paddle.static.Program()  # an optional input left out in a static graph (it was
    with paddle.static.program_guard(program):  # refused as "NoneType, not a static variable")
        out = shift(paddle.static.data("x", [2, 6], "float32"), None)
    got = paddle.static.Executor(paddle.CPUPlace()).run(
        program, feed={"x": np.arange(12.0, dtype="float32").reshape(2, 6)}, fetch_list=[out])
    np.testing.assert_array_equal(got[0], np.arange(12.0).reshape(2, 6))
    paddle.disable_static()
    print("ok")
""")
INPLACE_KERNEL = """\
  const int64_t d = args.x.shape().back();
  const XT* x = args.x.data<XT>();
  XT* out = args.out.data<XT>();  // x's memory in shift_(): read each x[i] before writing out[i]
  for (int64_t i = 0; i < args.x.numel(); ++i) {
    const double b = args.bias ? static_cast<double>(args.bias->data<XT>()[i % d]) : 0.0;
    out[i] = static_cast<XT>(static_cast<double>(x[i]) + b);
  }
"""


def _inplace_op(tmp_path: Path) -> Path:
    spec = tmp_path / "shift" / "shift.yaml"
    spec.parent.mkdir()
    spec.write_text(SHIFT_)
    api.generate(spec)
    cpu = spec.parent / "csrc" / "shift_cpu.h"
    skeleton = ("  if (args.out.data<XT>() != args.x.data<XT>()) {  // shift_(): the same tensor\n"
                "    std::copy_n(args.x.data<XT>(), args.x.numel(), args.out.data<XT>());\n  }\n")
    assert cpu.read_text().count(skeleton) == 1
    cpu.write_text(cpu.read_text().replace(skeleton, INPLACE_KERNEL, 1))
    reference = spec.parent / "reference.py"
    reference.write_text(reference.read_text().replace(
        "    return np.array(x, dtype=np.float64)", "    return x if bias is None else x + bias"))
    return spec.parent


@pytest.mark.build
def test_inplace_writes_over_the_input_and_passes_its_generated_tests(tmp_path):
    op = _inplace_op(tmp_path)
    env = {**os.environ, "GLOG_minloglevel": "3", "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-c", INPLACE_RUN, str(op)], capture_output=True,
                            text=True, env=env, check=False)
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), \
        result.stdout[-2000:] + result.stderr[-3000:]
    result = run_opgen("test", str(op), "--device", "cpu", "--", "-q", "-p", "no:warnings")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and "test_inplace" in (op / "test_shift.py").read_text()


@pytest.mark.build
@pytest.mark.gpu_env
def test_inplace_cuda_sources_compile_and_link(tmp_path):
    """paddlepaddle-gpu 2.6.2 builds the in-place op's CUDA half (and its eager entry refuses
    shift_, as Paddle 2.6 ignores SetInplaceMap there)."""
    if not GPU_PYTHON.exists():
        pytest.skip("no .venv-gpu (paddlepaddle-gpu 2.6.2): run scripts/setup.sh")
    op = _inplace_op(tmp_path)
    env = {"CUDA_HOME": os.environ.get("CUDA_HOME", "/usr/local/cuda")}
    result = run_opgen("test", str(op), "--device", "cpu", "--", "-q", "-p", "no:warnings",
                       "-k", "inplace", python=GPU_PYTHON, env=env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "CPU + CUDA sm_90" in result.stdout + result.stderr
    assert " passed" in result.stdout


# -- data-dependent sizes (-1) --------------------------------------------------------------------

MASKED_SELECT = ROOT / "tests" / "data" / "masked_select"

PAD = """\
name: pad
kind: custom
inputs:
  x: {dtype: float types, shape: [..., D]}
  lengths: {dtype: int64, shape: any, range: [0, D]}
outputs:
  out: {dtype: same as x, shape: "[x.shape[0], -1]"}
  copy: {dtype: same as x, shape: "[*x.shape]"}
  hits: {dtype: int64, shape: "[*lengths.shape, -1, k]"}
attrs:
  k: {type: int, default: 2}
backward: [x]
inplace: {x: copy}
sizes: {D: 4}
"""


@pytest.mark.parametrize(("old", "new", "line", "message"), [
    ("shape: [..., D]}", "shape: [-1, D]}", 4, "inputs.x.shape: -1 (a size known only from the "
     "data) is for outputs; an input's free dim is a name such as N, or '...'"),
    ('"[x.shape[0], -1]"', '"[x.shape[0], -2]"', 7, "outputs.out.shape: a dim is at least 0, or "
     "-1 for a size only the data gives; got -2"),
    ("inplace: {x: copy}", "inplace: {x: out}", 13, "inplace: out's shape [x.shape[0], -1] has a "
     "size only the data gives (-1); an output written over x has x's shape"),
])
def test_data_dependent_size_errors(old, new, line, message):
    assert old in PAD
    with pytest.raises(SpecError) as info:
        loads(PAD.replace(old, new), "pad.yaml", check_builtins=False)
    assert info.value.line == line, str(info.value)
    assert message in str(info.value)


def test_data_dependent_outputs_are_allocated_by_the_kernels():
    files = {k: v.decode() for k, v in
             render_op(loads(PAD, "pad.yaml", check_builtins=False)).files.items()}
    cc = files["csrc/pad.cc"]
    # InferShape says -1 where only the data knows; the entry leaves those outputs to the kernels
    # and checks they allocated them.
    assert ("out_shape.push_back(x_shape[0]); out_shape.push_back(int64_t{-1});" in
            " ".join(cc.split("PadInferShape")[1].split()))
    assert "paddle::Tensor out;  // [x.shape[0], -1]: the kernels' args.AllocateOut\n" in cc
    assert "paddle::Tensor copy = opgen::AllocateOutput(copy_shape, x.dtype(), x.place());" in cc
    assert cc.count('CheckAllocated(args, "ForwardCPU");') == 2  # pad and pad_ (in place)
    header = files["csrc/pad.h"]
    assert "paddle::Tensor& AllocateHits(const std::vector<int64_t>& shape) const {" in header
    assert 'opgen::AllocateDataDependent("custom_pad", "hits", "[*lengths.shape, -1, k]",' \
        in header
    # The skeleton allocates them with their -1 sizes 0, reading the sizes back on the GPU.
    assert "args.AllocateOut({args.x.shape()[0], 0});" in files["csrc/pad_cpu.h"]
    cuda = files["csrc/pad_cuda.cuh"]
    assert ("cudaMemcpyAsync(sizes, counted.data<int64_t>(), sizeof(sizes), "
            "cudaMemcpyDeviceToHost,\n                            gpu.stream)") in cuda
    assert "CheckCuda(cudaStreamSynchronize(gpu.stream), " in cuda
    assert "hits_shape.push_back(sizes[1]);" in cuda
    reference = files["reference.py"]
    assert "return np.zeros([*lengths.shape, 0, k])" in reference
    assert "return np.array(grad_copy, dtype=np.float64)" in reference
    # The wrapper always runs the kernels; the tests check the static graph's -1s.
    assert "_output_shapes" not in files["pad.py"]
    assert "def test_static_graph_has_the_data_dependent_sizes(tmp_path):" in files["test_pad.py"]
    assert "_output_shapes" in render_op(_load(SPEC)).files["lookup.py"].decode()


def _masked_select_op(tmp_path: Path) -> Path:
    """tests/data/masked_select generated in tmp_path, its kernels and reference over the
    skeleton's."""
    op = tmp_path / "masked_select"
    op.mkdir()
    shutil.copy(MASKED_SELECT / "masked_select.yaml", op)
    api.generate(op / "masked_select.yaml")
    for name in ("masked_select_cpu.h", "masked_select_cuda.cuh"):
        shutil.copy(MASKED_SELECT / name, op / "csrc")
    shutil.copy(MASKED_SELECT / "reference.py", op)
    return op


@pytest.mark.build
def test_masked_select_passes_its_generated_tests(tmp_path):
    """Outputs sized by the data ([-1], [-1, 2]): shapes and values against the reference, empty
    ones, gradients through them, and -1 in a to_static graph saved and loaded."""
    op = _masked_select_op(tmp_path)
    result = run_opgen("test", str(op), "--device", "cpu", "--", "-q", "-p", "no:warnings")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and " failed" not in result.stdout


@pytest.mark.build
@pytest.mark.gpu_env
def test_masked_select_cuda_sources_compile_and_link(tmp_path):
    """paddlepaddle-gpu 2.6.2 builds the CUDA half, and its generated tests pass on the CPU
    there (Paddle 2.6 refuses an empty output without memory: opgen::AllocateOutput)."""
    if not GPU_PYTHON.exists():
        pytest.skip("no .venv-gpu (paddlepaddle-gpu 2.6.2): run scripts/setup.sh")
    op = _masked_select_op(tmp_path)
    env = {"CUDA_HOME": os.environ.get("CUDA_HOME", "/usr/local/cuda")}
    result = run_opgen("test", str(op), "--device", "cpu", "--", "-q", "-p", "no:warnings",
                       python=GPU_PYTHON, env=env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "CPU + CUDA sm_90" in result.stdout + result.stderr
    assert " passed" in result.stdout and " failed" not in result.stdout


ALLOCATION_ERRORS = textwrap.dedent("""
    import sys
    import numpy as np
    import paddle
    sys.path.insert(0, sys.argv[1])
    from pad import pad

    x = paddle.ones([3, 4], "float32")
    lengths = paddle.to_tensor(np.array([1, 2], "int64"))
    out, _, hits = pad(x, lengths)
    assert out.shape == [3, 0] and hits.shape == [2, 0, 2], (out.shape, hits.shape)
    for k, message in [
            (5, "custom_pad: the kernel allocated out as [4, 0], but out's shape is "
                "[x.shape[0], -1] ([3, -1] for these inputs): dim 0 is 3"),
            (6, "custom_pad: the kernel allocated out as [3], but out's shape is "
                "[x.shape[0], -1]: 2 dims ([3, -1] for these inputs)"),
            (7, "custom_pad: ForwardCPU did not allocate out ([x.shape[0], -1], a size only the "
                "data gives): call args.AllocateOut(shape) once the kernel knows its shape")]:
        try:
            pad(x, lengths, k=k)
        except Exception as exc:
            assert message in str(exc), exc
        else:
            raise AssertionError(f"k={k} was not refused")
    print("ok")
""")


@pytest.mark.build
def test_a_data_dependent_skeleton_passes_its_tests_and_allocation_errors_name_the_output(
        tmp_path):
    spec = tmp_path / "pad" / "pad.yaml"
    spec.parent.mkdir()
    spec.write_text(PAD)
    api.generate(spec)
    result = run_opgen("test", str(spec.parent), "--device", "cpu", "--", "-q", "-p",
                       "no:warnings")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and " failed" not in result.stdout
    cpu = spec.parent / "csrc" / "pad_cpu.h"
    skeleton = "  args.AllocateOut({args.x.shape()[0], 0});\n"
    assert cpu.read_text().count(skeleton) == 1
    cpu.write_text(cpu.read_text().replace(skeleton, """\
  if (args.k == 5) {
    args.AllocateOut({args.x.shape()[0] + 1, 0});  // a fixed dim that is not the spec's
  } else if (args.k == 6) {
    args.AllocateOut({args.x.shape()[0]});  // one dim short
  } else if (args.k != 7) {  // 7: not at all
    args.AllocateOut({args.x.shape()[0], 0});
  }
"""))
    env = {**os.environ, "GLOG_minloglevel": "3", "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-c", ALLOCATION_ERRORS, str(spec.parent)],
                            capture_output=True, text=True, env=env, check=False)
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), \
        result.stdout[-2000:] + result.stderr[-3000:]


# -- shapes that compute: Python's //, no division by 0, no negative dim -------------------------

HALVE = (ROOT / "tests" / "specs" / "halve.yaml").read_text()


@pytest.mark.parametrize("divisor", ["0", "(2 - 2)", "-(3 * 0)"])
def test_a_shape_that_divides_by_a_literal_zero_is_refused(divisor):
    text = HALVE.replace("(1 - D) // k", f"(1 - D) // {divisor}")
    with pytest.raises(SpecError) as info:
        _load(text)
    assert info.value.line == 6
    assert f"outputs.out.shape: '(1 - D) // {divisor}' divides by 0" in str(info.value)


def test_computed_dims_are_checked_and_divide_as_python_does():
    cc = " ".join(render_op(_load(HALVE)).files["csrc/halve.cc"].decode().split())
    forward, infer_shape = cc.split("HalveInferShape(", 1)
    assert ('out_shape.push_back(opgen::ComputedDim(opgen::FloorDiv((int64_t{1} - '
            'x_shape.end()[-1]), int64_t{k}, kOutShape) + x_shape.end()[-1], kOutShape));'
            ) in forward
    assert "const char* const kRestShape = \"custom_halve: rest's shape [D - k]\";" in cc
    # InferShape: a dim Paddle does not know yet (-1, a static graph's free dim) makes -1
    assert ("rest_shape.push_back(opgen::AnyUnknown({x_shape.end()[-1]}) ? int64_t{-1} : "
            "opgen::ComputedDim(x_shape.end()[-1] - int64_t{k}, kRestShape));") in infer_shape
    assert "ComputedDim" not in render_op(_load(SPEC)).files["csrc/lookup.cc"].decode()


def test_an_output_dim_that_is_an_attr_is_checked_too():
    text = HALVE.replace('"[D - k]"', '"[k, D]"')
    cc = render_op(_load(text)).files["csrc/halve.cc"].decode()
    assert "rest_shape.push_back(opgen::ComputedDim(int64_t{k}, kRestShape));" in cc
    assert "rest_shape.push_back(x_shape.end()[-1]);" in cc


COMPUTED_DIMS = textwrap.dedent("""
    import sys
    import numpy as np
    import paddle
    sys.path.insert(0, sys.argv[1])
    import halve as op

    x = paddle.ones([3, 8], "float32")
    raw = op._ops().custom_halve
    for k, want in [(2, 4), (3, 5), (-1, 15)]:  # (1 - 8) // 2 + 8 is 4: C++'s / would give 5
        outs = [op.halve(x, k=k)[0], raw(x, k)[0]]
        assert [o.shape for o in outs] == [[want]] * 2, (k, [o.shape for o in outs])
    for k, call, message in [
            (0, op.halve, "halve: an output's shape divides a dim by 0 for these inputs "
                          "(out: [(1 - D) // k + D]; rest: [D - k])"),
            (0, raw, "custom_halve: out's shape [(1 - D) // k + D]: a dim is divided by 0 for "
                     "these inputs"),
            (11, op.halve, "halve: rest's shape [D - k]: a dim is -3 for these inputs; "
                           "a size is at least 0"),
            (11, raw, "custom_halve: rest's shape [D - k]: a dim is -3 for these inputs; "
                      "a size is at least 0")]:
        try:
            call(x, k=k) if call is op.halve else call(x, k)
        except Exception as exc:
            assert message in str(exc), exc
        else:
            raise AssertionError(f"k={k} was not refused")

    # A static graph whose D Paddle does not know yet: InferShape gives -1, the run the shapes.
    paddle.enable_static()
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        data = paddle.static.data("x", [3, -1], "float32")
        out, rest = op.halve(data, k=2)
        assert list(out.shape) == [-1] and list(rest.shape) == [-1], (out.shape, rest.shape)
    exe = paddle.static.Executor(paddle.CPUPlace())
    got = exe.run(main, feed={"x": np.ones([3, 8], "float32")}, fetch_list=[out, rest])
    assert [g.shape for g in got] == [(4,), (6,)], [g.shape for g in got]
    paddle.disable_static()
    print("ok")
""")


@pytest.mark.build
def test_computed_dims_agree_with_python_and_refuse_what_no_tensor_has(tmp_path):
    spec = tmp_path / "halve" / "halve.yaml"
    spec.parent.mkdir()
    spec.write_text(HALVE)
    api.generate(spec)
    api.build_op(spec.parent, cpu_only=True)
    env = {**os.environ, "GLOG_minloglevel": "3", "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-c", COMPUTED_DIMS, str(spec.parent)],
                            capture_output=True, text=True, env=env, check=False)
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), \
        result.stdout[-2000:] + result.stderr[-3000:]


@pytest.mark.parametrize(("kind", "message"), [
    ("custm", "kind: unknown kind 'custm'; expected one of 'elementwise', 'rowwise', 'custom'; "
              "did you mean 'custom'?"),
    ("Custom", "kind: unknown kind 'Custom'; expected one of 'elementwise', 'rowwise', "
               "'custom'; did you mean 'custom'?"),
    ("[custom]", "kind: expected one kind of 'elementwise', 'rowwise', 'custom', got a list"),
    ("", "kind: no kind given; expected one of 'elementwise', 'rowwise', 'custom'"),
])
def test_a_wrong_kind_on_a_custom_spec_is_named_first(kind, message):
    """A custom spec's sections read as another kind's would fail on their own (its inputs are
    a mapping of mappings): the kind is checked first, and named."""
    with pytest.raises(SpecError) as info:
        _load(SPEC.replace("kind: custom", f"kind: {kind}"))
    assert info.value.line == 2
    assert str(info.value).endswith(message)


def test_a_tensor_doc_reads_back_in_the_wrapper_whatever_it_holds():
    """A tensor's ``doc:`` lands in the wrapper's docstring escaped, as the summary does: quotes
    that would end the docstring and backslashes read back as written (a doc holding three quotes
    made the wrapper a SyntaxError)."""
    import ast

    doc = 'a """ b */ \\ c "'
    spec = loads(textwrap.dedent(f"""\
        name: doc_op
        kind: custom
        inputs:
          x: {{dtype: float types, shape: [..., D], doc: {json.dumps(doc)}}}
        outputs:
          out: {{dtype: same as x, shape: "[*x.shape]", doc: {json.dumps(doc)}}}
        """), "doc_op.yaml")
    wrapper = render_op(spec).files["doc_op.py"].decode()
    docstring = ast.get_docstring(next(node for node in ast.parse(wrapper).body
                                       if getattr(node, "name", "") == "doc_op"))
    assert docstring.count(doc) == 2, docstring


def test_a_dim_past_what_a_leading_ellipsis_guarantees_is_refused_at_its_line():
    """``x: [..., D]`` is sure to have one dim: ``x.shape[3]`` read past a rank-2 tensor's shape
    in the generated C++ (no error, a garbage size), so the spec refuses it."""
    with pytest.raises(SpecError) as caught:
        loads(textwrap.dedent("""\
            name: far_dim
            kind: custom
            inputs:
              x: {dtype: float types, shape: [..., D]}
            outputs:
              out: {dtype: same as x, shape: "[x.shape[3]]"}
            """), "far_dim.yaml")
    assert str(caught.value) == (
        "far_dim.yaml:6: outputs.out.shape: x.shape[3] may not exist: x's shape [..., D] has at "
        "least 1 dim (indices -1 to 0); declare the dims it reads")
    for index in (0, -1):  # within what it is sure to have
        loads(textwrap.dedent(f"""\
            name: near_dim
            kind: custom
            inputs:
              x: {{dtype: float types, shape: [..., D]}}
            outputs:
              out: {{dtype: same as x, shape: "[x.shape[{index}]]"}}
            """), "near_dim.yaml")


def test_a_dim_of_an_input_of_any_shape_is_its_first_or_last():
    """``ids`` of any shape may be 0-D: an output's shape reads ``ids.shape[0]`` or
    ``ids.shape[-1]`` at most (each call checks it has a dim, test_a_read_dim_of_an_input_of_any_
    shape_is_checked_at_each_call); ``ids.shape[1]`` is refused at its line (the generated tests'
    inputs of any shape have one dim in most cases, and read past it the C++ gave garbage)."""
    with pytest.raises(SpecError) as caught:
        loads(GROW.replace("ids.shape[0]", "ids.shape[1]"), "grow.yaml")
    assert str(caught.value) == (
        "grow.yaml:8: outputs.picked.shape: ids.shape[1] may not exist: ids's shape is any, so an "
        "output's shape reads its first or last dim at most (ids.shape[0] or ids.shape[-1]); "
        "declare the dims it reads, as [..., A, B]")
    for index in ("0", "-1"):
        spec = loads(GROW.replace("ids.shape[0]", f"ids.shape[{index}]"), "grow.yaml")
        cc = " ".join(render_op(spec).files["csrc/grow.cc"].decode().split())
        assert (f'opgen::CheckRank("custom_grow", "ids", ids_shape, 1, true, "(picked\'s shape '
                f'reads ids.shape[{index}])");') in cc


READ_DIM = textwrap.dedent("""
    import sys
    import numpy as np
    import paddle
    sys.path.insert(0, sys.argv[1])
    import grow as op

    x, scalar = paddle.ones([2, 3]), paddle.to_tensor(np.array(4, "int64"))
    message = "ids must have at least 1 dim (picked's shape reads ids.shape[0]), got shape []"
    for call in (lambda: op.grow(x, scalar), lambda: op._ops().custom_grow(x, scalar)):
        try:
            call()
        except Exception as exc:  # the wrapper's ValueError, or the raw op's from CheckInputs
            assert message in str(exc), exc
        else:
            raise AssertionError("a 0-D ids was taken")
    out, picked = op.grow(x, paddle.to_tensor(np.arange(5)))
    assert list(out.shape) == [3, 3] and list(picked.shape) == [10], (out.shape, picked.shape)
    print("ok")
""")


@pytest.mark.build
def test_a_read_dim_of_an_input_of_any_shape_is_checked_at_each_call(tmp_path):
    """GROW's ``picked`` is ``[ids.shape[0] * 2]`` with ``ids`` of any shape: a 0-D ``ids`` is a
    clear error through the wrapper and the raw op (the C++ read past its shape), a 1-D one
    gives ``picked`` its length."""
    spec = tmp_path / "grow" / "grow.yaml"
    spec.parent.mkdir()
    spec.write_text(GROW)
    api.generate(spec)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GLOG_minloglevel": "3"}
    result = subprocess.run([sys.executable, "-c", READ_DIM, str(spec.parent)],
                            capture_output=True, text=True, env=env, check=False)
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), \
        result.stdout[-2000:] + result.stderr[-3000:]


def test_an_op_whose_inputs_need_no_check_renders():
    """One input of any shape and of a dtype list the kernels dispatch on: nothing for the C++
    checks to say. Its comment was built from an empty list (an IndexError, a traceback from
    `opgen generate`)."""
    spec = loads(textwrap.dedent("""\
        name: unchecked
        kind: custom
        inputs:
          x: {dtype: float types, shape: any}
        outputs:
          out: {dtype: same as x, shape: "[*x.shape]"}
        """), "unchecked.yaml")
    cc = render_op(spec).files["csrc/unchecked.cc"].decode()
    assert "CheckInputs" not in cc and "PD_BUILD_OP(custom_unchecked)" in cc
