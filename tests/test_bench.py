"""``opgen bench`` on the CPU: comparisons Paddle cannot run are skipped with a note, the rows
already measured are reported and written when a later step fails, and ``--shapes`` is parsed,
checked and counted (those tests build nothing).

Tiny sizes and one repeat: these check the command's behaviour, not any figure.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import run_opgen

from opgen import bench, cli
from opgen.bench import Case, backward_elements, copy_elements, forward_elements, parse_shapes
from opgen.errors import UsageError

ROOT = Path(__file__).resolve().parent.parent

#: tanh: Paddle 3.3.1 has no CPU float16 or bfloat16 kernel for it.
SPEC = """\
name: t_tanh
op_name: custom_t_tanh
kind: elementwise
inputs: [x]
outputs: [out]
dtypes: [float32, float16, bfloat16]
forward:
  out: tanh(x)
baseline: tanh(x)
"""


@pytest.fixture(scope="module")
def tanh_op(tmp_path_factory) -> Path:
    op = tmp_path_factory.mktemp("bench") / "t_tanh"
    op.mkdir()
    (op / "t_tanh.yaml").write_text(SPEC)
    result = run_opgen("generate", str(op / "t_tanh.yaml"))
    assert result.returncode == 0, result.stderr
    result = run_opgen("build", str(op), "--cpu-only")
    assert result.returncode == 0, result.stderr
    return op


@pytest.mark.build
def test_a_baseline_paddle_cannot_run_is_skipped_with_one_line(tanh_op, tmp_path):
    out = tmp_path / "bench.json"
    result = run_opgen("bench", str(tanh_op), "--sizes", "1024,2^10", "--repeats", "1",
                       "--json", str(out))  # one size, given twice: timed once
    assert result.returncode == 0, result.stderr[-3000:]
    notes = [line for line in result.stdout.splitlines() if line.startswith("note: ")]
    assert [n.split(":")[1] for n in notes] == [" baseline skipped for float16",
                                                " baseline skipped for bfloat16"], notes
    assert "`tanh` is not registered" in notes[0] and "Paddle cannot run it on the CPU" \
        in notes[0]
    # not a terminal: each step is logged as it starts (a bar would draw nothing in a log)
    steps = [line for line in result.stderr.splitlines() if line.startswith("bench [")]
    assert steps[0] == f"bench [1/{len(steps)}] building the op", steps
    assert any(line.endswith("float32 n=1024") for line in steps), steps
    data = json.loads(out.read_text())
    kernels = sorted((r["dtype"], r["kernel"]) for r in data["rows"])
    assert kernels == sorted([("float32", "op"), ("float32", "copy"), ("float32", "baseline"),
                              ("float16", "op"), ("float16", "copy"),
                              ("bfloat16", "op"), ("bfloat16", "copy")])
    assert [(s["kernel"], s["dtype"]) for s in data["skipped"]] == \
        [("baseline", "float16"), ("baseline", "bfloat16")]
    assert data["error"] is None


@pytest.mark.build
def test_rows_measured_before_a_failure_are_written(tanh_op, tmp_path, monkeypatch, capsys):
    real = bench.bench_paddle

    def fails_at_bfloat16(*args, **kwargs):
        if "bfloat16" in args:
            raise RuntimeError("(ResourceExhausted) Out of memory\n  [Hint: ...]")
        return real(*args, **kwargs)

    monkeypatch.setattr(bench, "bench_paddle", fails_at_bfloat16)
    out = tmp_path / "bench.json"
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["bench", str(tanh_op), "--sizes", "1024", "--repeats", "1", "--compare",
                  "copy", "--json", str(out)])
    assert exit_info.value.code == 1
    captured = capsys.readouterr()
    assert captured.err.splitlines()[-1] == \
        "error: bfloat16 n=1024: (ResourceExhausted) Out of memory"
    assert "Traceback" not in captured.err and "(incomplete)" in captured.out
    data = json.loads(out.read_text())
    assert {(r["dtype"], r["kernel"]) for r in data["rows"]} == \
        {("float32", "op"), ("float32", "copy"), ("float16", "op"), ("float16", "copy")}
    assert data["error"] == "bfloat16 n=1024: (ResourceExhausted) Out of memory"


@pytest.mark.build
def test_outputs_are_checked_before_measuring(tanh_op, tmp_path):
    result = run_opgen("bench", str(tanh_op), "--sizes", "1024", "--repeats", "1", "--compare",
                       "copy", "--json", str(tmp_path / "no" / "b.json"))
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("error: --json ") and "no folder" in result.stderr
    assert result.stdout == ""  # refused before measuring


def test_the_naive_kernel_is_refused_on_the_cpu(tmp_path):
    result = run_opgen("bench", str(ROOT / "examples" / "relu6"), "--compare", "copy,naive",
                       "--sizes", "1024")
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr == ("error: --compare naive: the naive kernel is a CUDA launch, timed "
                             "with --device gpu; on the CPU choose copy or baseline\n")
    assert result.stdout == ""  # refused before building or measuring


# -- --shapes: parsing, checks and bytes, without building --------------------------------------

def test_shapes_parse_into_cases_with_their_broadcast_shape():
    cases = parse_shapes("16384x1024:1024, 4096x4096:4096,64x1x512:1x256x512,2^4x3:[]:scalar")
    assert [c.shapes for c in cases] == [((16384, 1024), (1024,)), ((4096, 4096), (4096,)),
                                         ((64, 1, 512), (1, 256, 512)), ((16, 3), (), ())]
    assert [c.out_shape for c in cases] == [(16384, 1024), (4096, 4096), (64, 256, 512),
                                            (16, 3)]
    assert [c.size for c in cases] == [16384 * 1024, 4096 * 4096, 64 * 256 * 512, 48]
    assert [c.label for c in cases] == ["16384x1024:1024", "4096x4096:4096",
                                        "64x1x512:1x256x512", "16x3:[]:[]"]
    assert cases[0].describe("float32") == "float32 16384x1024:1024"
    assert Case(1024).describe("float16") == "float16 n=1024" and Case(1024).label is None


@pytest.mark.parametrize(("text", "message"), [
    ("64x33:32", "--shapes 64x33:32: 64x33 and 32 do not broadcast: 33 against 32 in the last "
                 "dim; aligned from the right, each dim must be equal or 1"),
    ("2x3x4:5x1x4", "--shapes 2x3x4:5x1x4: 2x3x4 and 5x1x4 do not broadcast: 2 against 5 in dim "
                    "-3 (from the right)"),
    ("64x33:", "--shapes: an empty shape in '64x33:' is not a shape; expected dims separated"),
    ("64xx3", "--shapes: '64xx3' is not a shape"),
    ("64*3", "--shapes: '64*3' is not a shape"),
    ("8:-1", "--shapes: '-1' in '8:-1' is not a shape"),
    ("4,,5", "--shapes 4,,5: an empty case"),
    ("0x3", "--shapes 0x3: '0x3' has a dim below 1"),
])
def test_bad_shapes_are_one_line(text, message):
    with pytest.raises(UsageError) as info:
        parse_shapes(text)
    assert str(info.value).startswith(message) and "\n" not in str(info.value)


def test_a_case_needs_one_shape_per_input():
    bench.check_case(Case.of(((8, 4), (4,))), ["x", "bias"], "bias_gelu")
    with pytest.raises(UsageError, match=r"^--shapes 8x4: bias_gelu takes 2 inputs \(x, bias\), "
                       r"one shape per input separated by ':'; got 1 shape$"):
        bench.check_case(Case.of(((8, 4),)), ["x", "bias"], "bias_gelu")


def test_shapes_bytes_count_each_input_at_its_own_shape():
    n, c = 16384, 1024
    case = parse_shapes(f"{n}x{c}:{c}")[0]
    # x and bias read once each, out written at [n, c]
    assert forward_elements(case, 2, 1) == n * c + c + n * c
    assert 2 * copy_elements(case, 2, 1) == forward_elements(case, 2, 1)  # the same bytes
    odd = parse_shapes("3:1")[0]
    assert forward_elements(odd, 2, 1) == 7 and copy_elements(odd, 2, 1) == 4  # rounded up
    # the backward reads x, bias and grad_out, and writes grad_x [n, c] and grad_bias [c]
    reads = ["x", "bias", "grad_out"]
    assert backward_elements(case, ["x", "bias"], reads) == (n * c + c + n * c) + (n * c + c)


def test_sizes_bytes_are_what_they_always_were():
    case = Case(1024)
    assert forward_elements(case, 2, 1) == 3 * 1024
    assert copy_elements(case, 2, 1) == 1024
    assert backward_elements(case, ["x", "y"], ["x", "y", "grad_out"]) == 5 * 1024


def test_json_and_notes_name_the_case_only_with_shapes():
    row = bench.Row("op", "forward", "float32", 8, 96, 1.0, 0.0)
    assert "shapes" not in bench.as_dict(row)
    assert bench.as_dict(bench.Row("op", "forward", "float32", 8, 96, 1.0, 0.0, "8:1"))[
        "shapes"] == "8:1"
    assert bench.Skipped("baseline", "float16", "no kernel").line() == \
        "baseline skipped for float16: no kernel"
    assert bench.Skipped("op backward", None, "a reduction", "8x4:4").line() == \
        "op backward skipped at 8x4:4: a reduction"


def test_an_output_of_another_shape_is_refused():
    class Out:
        shape = [8, 4]

    bench._check_outputs([Out()], parse_shapes("8x1:1x4")[0], "bias_gelu")
    with pytest.raises(bench.BenchError, match=r"^bias_gelu returned shape 8x4 for 8x1:1x2; "
                       r"expected 8x2$"):
        bench._check_outputs([Out()], parse_shapes("8x1:1x2")[0], "bias_gelu")


@pytest.mark.parametrize(("args", "message"), [
    (["--shapes", "4:4"], "error: --shapes 4:4: relu6 takes 1 input (x), one shape per input "
                          "separated by ':'; got 2 shapes"),
    (["--shapes", "4", "--sizes", "4"], "--sizes or --shapes, not both"),
    (["--shapes", "4x"], "error: --shapes: '4x' is not a shape"),
    (["--sizes", "2^99"], "--sizes: 2^99: a size is at least 1 and below 2^63 (int64)"),
    (["--sizes", "1024,2^-3"], "--sizes: 2^-3: a size is at least 1 and below 2^63 (int64)"),
    (["--sizes", "0"], "--sizes: 0: a size is at least 1 and below 2^63 (int64)"),
    (["--sizes", "1e400"], "expected sizes like 1048576 or 2^20, got '1e400'"),
    (["--sizes", "1.5"], "expected sizes like 1048576 or 2^20, got '1.5'"),
    (["--shapes", "2^99999"], "--shapes 2^99999: '2^99999' has a dim of 2^63 or more (int64)"),
    (["--shapes", "2^40x2^40"], "'2^40x2^40' has 2^63 elements or more (int64)"),
    (["--shapes", "99999999999999999999"], "has a dim of 2^63 or more"),
    (["--json", str(ROOT / "examples" / "relu6" / "relu6.yaml")],
     "relu6.yaml: exists and is not a .json file; --json would replace it"),
    (["--plot", str(ROOT / "examples" / "relu6" / "relu6.py")],
     "relu6.py: exists and is not a .png file; --plot would replace it"),
    (["--sizes", ""], "--sizes: empty; give sizes like 2^20,2^24, or leave it out"),
    (["--repeats", "1001"], "--repeats: 1001: timed batches are 1 to 1000"),  # 10^11 ran days
    (["--repeats", "0"], "--repeats: 0: timed batches are 1 to 1000"),
    (["--dtype", "float32,float16"], "--dtype float32,float16: one dtype a flag; repeat it"),
    (["--compare", "none,copy"], "--compare: expected none, or any of copy, baseline and naive"),
    (["--compare", ""], "--compare: expected none, or any of copy, baseline and naive"),
    # matplotlib's format is the name's ending: a traceback after the run, or plot.png replaced
    (["--plot", "plot.txt"], "--plot plot.txt: name a .png file"),
    (["--plot", "plot"], "--plot plot: name a .png file"),
    (["--json", "r.png", "--plot", "r.png"], "--plot: r.png is --json's file too"),
    (["--json", str(ROOT / "examples" / ".." / "r.png"), "--plot", str(ROOT / "r.png")],
     "r.png is --json's file too"),
    (["--sizes", " "], "--sizes: empty; give sizes like 2^20,2^24, or leave it out"),
    # a folder that takes no file (os.access told root it was writable)
    (["--json", "/proc/x.json"], "--json /proc/x.json: the folder /proc is not writable"),
])
def test_bad_shapes_and_sizes_exit_2_before_measuring(args, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["bench", str(ROOT / "examples" / "relu6"), "--repeats", "1", *args])
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    errors = [line for line in captured.err.splitlines() if line.strip()]
    assert len(errors) == 1 and message in errors[0], captured.err
    assert captured.out == ""


@pytest.mark.parametrize(("args", "message"), [
    # a rowwise op has no naive kernel: asked for, it was dropped silently and the build began
    (["--compare", "naive"], "--compare naive: softmax is a rowwise op, which has no naive "
                             "kernel to compare with; choose copy or baseline"),
    (["--compare", "copy,naive"], "--compare naive: softmax is a rowwise op"),
    (["--compare", "copy,baseline,naive"], "--compare naive: softmax is a rowwise op"),
    (["--sizes", "1024"], "--sizes: softmax is a rowwise op; give its rows with --shapes"),
    # said so, not "16x32 and 31 do not broadcast" (while 16x32:1:1 got this message)
    (["--shapes", "16x32:31:32"], "--shapes 16x32:31:32: softmax is a rowwise op: give one "
                                  "shape per case"),
    (["--shapes", "8x8,16x32:1:1"], "--shapes 16x32:1:1: softmax is a rowwise op"),
])
def test_a_rowwise_ops_bad_flags_exit_2_before_building(args, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["bench", str(ROOT / "examples" / "softmax"), "--repeats", "1", *args])
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and message in captured.err, captured.err
    assert captured.out == ""


def test_bench_of_an_op_whose_spec_is_broken_is_the_error_alone(tmp_path):
    """The bench reads the spec (its baseline): a broken one is the error, without the warning
    that the build would use the op as it was."""
    op = tmp_path / "relu6"
    shutil.copytree(ROOT / "examples" / "relu6", op)
    (op / "relu6.yaml").write_text("name: relu6\nbad: [\n")
    result = run_opgen("bench", str(op), "--repeats", "1")
    assert result.returncode == 2
    assert result.stderr == f"error: {op / 'relu6.yaml'}:3: invalid YAML: expected the node " \
        "content, but found '<stream end>'\n"


def test_bench_on_the_gpu_without_one_is_one_line():
    """Paddle's import printed its "No ccache found" warning (two lines) before the error."""
    from opgen.probe import paddle_info

    info = paddle_info()
    if info is not None and info.gpu_count:
        pytest.skip("this machine has a GPU")
    result = run_opgen("bench", str(ROOT / "examples" / "relu6"), "--device", "gpu",
                       "--repeats", "1")
    assert (result.returncode, result.stderr) == (2, "error: --device gpu: no GPU visible to "
                                                     "Paddle\n")


#: Two inputs and a backward: what --shapes counts per input. Same shapes until ops broadcast.
MUL_SPEC = """\
name: t_muladd
op_name: custom_t_muladd
kind: elementwise
inputs: [x, y]
outputs: [out]
dtypes: [float32]
forward:
  out: x * y + x
backward: auto
baseline: x * y + x
"""


@pytest.mark.build
def test_shapes_time_each_case_and_count_its_bytes(tmp_path):
    op = tmp_path / "t_muladd"
    op.mkdir()
    (op / "t_muladd.yaml").write_text(MUL_SPEC)
    assert run_opgen("generate", str(op / "t_muladd.yaml")).returncode == 0
    out = tmp_path / "bench.json"
    result = run_opgen("bench", str(op), "--shapes", "64x33:64x33,8x1x4:8x1x4", "--repeats", "1",
                       "--json", str(out))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "64x33:64x33" in result.stdout and "shapes" in result.stdout
    data = json.loads(out.read_text())
    rows = {(r["shapes"], r["kernel"], r["direction"]): r for r in data["rows"]}
    n = 64 * 33
    assert {k[1:] for k in rows} == {("op", "forward"), ("op", "backward"),
                                     ("op-autograd", "backward"), ("copy", "forward"),
                                     ("baseline", "forward")}
    assert {k[0] for k in rows} == {"64x33:64x33", "8x1x4:8x1x4"}
    case = {k[1:]: r for k, r in rows.items() if k[0] == "64x33:64x33"}
    assert all(r["size"] == n for r in case.values())
    # read x and y, write out; the copy moves as much; the backward reads x, y and grad_out and
    # writes grad_x and grad_y
    assert case["op", "forward"]["bytes"] == case["copy", "forward"]["bytes"] == 3 * n * 4
    assert case["baseline", "forward"]["bytes"] == 3 * n * 4
    assert case["op", "backward"]["bytes"] == case["op-autograd", "backward"]["bytes"] == 5 * n * 4
    assert {s["shapes"] for s in data["summary"]} == {"64x33:64x33", "8x1x4:8x1x4"}
    assert all(s["x_copy"] and s["speedup_vs_baseline"] for s in data["summary"]
               if s["direction"] == "forward")


@pytest.mark.build
def test_per_call_times_the_op_its_raw_api_and_the_builtin_at_small_sizes(tanh_op, tmp_path):
    out = tmp_path / "bench.json"
    result = run_opgen("bench", str(tanh_op), "--sizes", "1024", "--dtype", "float32",
                       "--repeats", "1", "--compare", "none", "--json", str(out))
    assert result.returncode == 0, result.stderr[-3000:]
    section = result.stdout[result.stdout.index("t_tanh per call"):]
    assert "op: t_tanh(x)" in section and "raw API: custom_t_tanh(x)" in section
    assert "built-in: tanh(x)" in section  # no F.t_tanh: the spec's baseline
    assert "INFO" not in result.stdout and "ccache" not in result.stdout
    per_call = json.loads(out.read_text())["per_call"]
    assert [(e["device"], e["size"]) for e in per_call] == \
        [("cpu", 1), ("cpu", 1024), ("cpu", 65536)]
    for e in per_call:
        assert e["op"] > 0 and e["raw"] > 0 and e["builtin"] > 0
        assert e["op_over_builtin"] == pytest.approx(e["op"] / e["builtin"])
        assert e["op_over_raw"] == pytest.approx(e["op"] / e["raw"])


def test_per_call_entries_take_turns_a_batch_each_round():
    order: list[str] = []
    fns = [lambda: order.append("op"), lambda: order.append("raw")]
    us = bench.best_us_each(fns, lambda: order.append("sync"), calls=2, rounds=2)
    assert len(us) == 2 and all(u >= 0 for u in us)
    timed = order[order.index("sync") + 1:]  # after the warm-up calls and their sync
    assert timed == ["op", "op", "sync", "raw", "raw", "sync"] * 2


def test_per_call_ratios_pair_each_size_and_device():
    calls = [bench.CallRow("op", "r(x)", "cpu", 1, 6.0),
             bench.CallRow("raw", "c(x)", "cpu", 1, 5.0),
             bench.CallRow("builtin", "F.r(x)", "cpu", 1, 2.0),
             bench.CallRow("op", "r(x)", "gpu", 1, 9.0)]
    cpu, gpu = bench.per_call_ratios(calls)
    assert (cpu["op_over_builtin"], cpu["op_over_raw"]) == (3.0, 1.2)
    assert (gpu["device"], gpu["op_over_builtin"], gpu["op_over_raw"]) == ("gpu", None, None)


def test_a_plot_draws_each_series_in_one_colour_in_every_panel(tmp_path):
    pytest.importorskip("matplotlib")
    rows = [bench.Row(kernel, "forward", dtype, size, 8 * size, 0.01, 1.0 + size / 1024)
            for dtype in ("float32", "float16") for size in (1024, 4096)
            for kernel in (("op", "copy", "baseline") if dtype == "float32" else ("op", "copy"))]
    colours = bench.series_colours(rows)
    # float16 has no baseline, but its copy keeps the colour float32's copy has
    assert colours == {"baseline forward": "C0", "copy forward": "C1", "op forward": "C2"}
    bench.plot(rows, tmp_path / "b.png", "t")
    assert (tmp_path / "b.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
