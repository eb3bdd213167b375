"""The Paddle-free broadcasting runtime (issue 11 §2), on the CPU: opgen/broadcast.h's shape rules,
plans and loops, and opgen/divider.h, driven by tests/cpp/broadcast_runtime.cc and compared with
numpy; and the GPU bench (scripts/gpu/broadcast_bench.cu, which runs on an H200) compiled with
nvcc where there is one."""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
CSRC = ROOT / "templates" / "elementwise" / "csrc"
COMMON_CSRC = ROOT / "templates" / "common" / "csrc"
DRIVER = ROOT / "tests" / "cpp" / "broadcast_runtime.cc"
BENCH = ROOT / "scripts" / "gpu" / "broadcast_bench.cu"
GPP = shutil.which("g++")


def _nvcc() -> str | None:
    home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    return shutil.which("nvcc") or next(
        (str(p) for p in (Path(home) / "bin" / "nvcc",) if p.exists()), None)


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if GPP is None:
        pytest.skip("needs g++")
    binary = tmp_path_factory.mktemp("broadcast") / "broadcast_runtime"
    subprocess.run([GPP, "-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror", f"-I{CSRC}",
                    f"-I{COMMON_CSRC}", str(DRIVER), "-o", str(binary)],
                   check=True, capture_output=True, text=True)
    return binary


def ask(driver: Path, *commands: str) -> list[dict]:
    """The driver's JSON answer to each command."""
    result = subprocess.run([str(driver)], input="".join(c + "\n" for c in commands),
                            capture_output=True, text=True, check=True)
    return [json.loads(line) for line in result.stdout.splitlines()]


def spelled(*shapes: tuple[int, ...]) -> str:
    return ";".join(",".join(str(d) for d in shape) for shape in shapes)


# ---- shapes ------------------------------------------------------------------------------------

def test_incompatible_shapes_name_the_inputs_and_dims(driver: Path) -> None:
    [bad, negative, wide] = ask(driver, "plan 2,3;4", "plan 2,-1;3",
                                "plan 2,1,2,1,2,1,2,1,2;1,2,1,2,1,2,1,2,1")
    assert bad["error"] == (
        "input #0 [2, 3] and input #1 [4] do not broadcast: aligned at their last dims, dim 1 of "
        "input #0 is 3 and dim 0 of input #1 is 4; sizes must match or be 1")
    assert negative["error"] == "input #0 has a negative dim: [2, -1]"
    assert wide["error"].endswith("which keeps 9 dims after merging contiguous ones; at most 8 "
                                  "are supported")


def test_error_names_the_input_that_set_the_dim(driver: Path) -> None:
    [answer] = ask(driver, "plan 1,5;4,1;3")
    assert answer["error"].startswith("input #0 [1, 5] and input #2 [3] do not broadcast")
    assert "dim 1 of input #0 is 5 and dim 0 of input #2 is 3" in answer["error"]


@pytest.mark.parametrize("rank_a, rank_b", [(0, 2), (1, 1), (2, 1), (2, 3), (3, 3)])
def test_every_small_shape_pair_broadcasts_as_numpy_does(driver: Path, rank_a: int,
                                                         rank_b: int) -> None:
    sizes = (0, 1, 2, 3)
    pairs = [(a, b) for a in itertools.product(sizes, repeat=rank_a)
             for b in itertools.product(sizes, repeat=rank_b)]
    answers = ask(driver, *(f"plan {spelled(a, b)}" for a, b in pairs))
    for (a, b), answer in zip(pairs, answers, strict=True):
        try:
            want = list(np.broadcast_shapes(a, b))
        except ValueError:
            assert "error" in answer, (a, b)
            continue
        assert answer.get("out_shape") == want, (a, b, answer)
        assert answer["numel"] == int(np.prod(want))


# ---- plans -------------------------------------------------------------------------------------

PLANS = [
    # shapes, pattern, coalesced dims, strides per input
    (((16, 1024), (1024,)), "trailing vector", [16, 1024], [[1024, 1], [0, 1]]),
    (((4, 8, 32), (32,)), "trailing vector", [32, 32], [[32, 1], [0, 1]]),
    (((1024,), (16, 1024)), "trailing vector", [16, 1024], [[0, 1], [1024, 1]]),
    (((8, 3, 5), (8, 1, 1)), "leading vector", [8, 15], [[15, 1], [1, 0]]),
    (((16, 1024), (16, 1)), "leading vector", [16, 1024], [[1024, 1], [1, 0]]),
    (((2, 3, 4), ()), "scalar operand", [24], [[1], [0]]),
    (((), (1, 1, 7)), "scalar operand", [7], [[0], [1]]),
    (((2, 3, 4), (1, 1, 1)), "scalar operand", [24], [[1], [0]]),
    (((2, 3), (2, 3)), "same shape", [6], [[1], [1]]),
    (((1, 6), (6,)), "same shape", [6], [[1], [1]]),
    (((), ()), "same shape", [], [[], []]),
    (((0, 3), (3,)), "empty", [], [[], []]),
    (((64, 1, 512), (1, 256, 512)), "general", [64, 256, 512], [[512, 0, 1], [0, 512, 1]]),
    (((3, 1), (3,)), "general", [3, 3], [[1, 0], [0, 1]]),
    (((2, 1, 3, 4), (2, 5, 1, 1)), "general", [2, 5, 12], [[12, 0, 1], [5, 1, 0]]),
]


@pytest.mark.parametrize("shapes, pattern, dims, strides", PLANS,
                         ids=[spelled(*p[0]) or ";" for p in PLANS])
def test_plans_coalesce_and_classify(driver: Path, shapes, pattern, dims, strides) -> None:
    [plan] = ask(driver, f"plan {spelled(*shapes)}")
    assert (plan["pattern"], plan["dims"], plan["strides"]) == (pattern, dims, strides)


def test_nine_input_dims_that_merge_fit_the_plan(driver: Path) -> None:
    [plan] = ask(driver, "plan 2,2,2,2,2,2,2,2,2;1,1,1,1,1,1,1,2,2")
    assert plan["dims"] == [128, 4] and plan["pattern"] == "trailing vector"


def test_backward_plans_keep_the_forward_pattern(driver: Path) -> None:
    [bias, row, scalar] = ask(driver, "plan 16,1024;1024;16,1024", "plan 16,1024;16,1;16,1024",
                              "plan 16,1024;;16,1024")
    assert bias["pattern"] == "trailing vector" and bias["full"] == [True, False, True]
    assert row["pattern"] == "leading vector" and row["full"] == [True, False, True]
    assert scalar["pattern"] == "scalar operand"


# ---- loops -------------------------------------------------------------------------------------

def values(k: int, count: int, dtype: np.dtype) -> np.ndarray:
    """Input k as the driver makes it (Value() in broadcast_runtime.cc)."""
    i = np.arange(count, dtype=np.int64)
    return (((i * 7919 + k * 104729) % 2003) / 1001.0 - 1.0).astype(dtype)


def reference(op: str, a: tuple[int, ...], b: tuple[int, ...], dtype: np.dtype,
              null: int | None = None):
    """The forward output and both gradients in float64 from the dtype's inputs (input `null`, if
    given, all zeros), and for each gradient the sum of its terms' magnitudes (what float
    summation error scales with)."""
    out_shape = np.broadcast_shapes(a, b)
    x = values(0, int(np.prod(a)), dtype).reshape(a).astype(np.float64)
    y = values(1, int(np.prod(b)), dtype).reshape(b).astype(np.float64)
    dy = values(2, int(np.prod(out_shape)), dtype).reshape(out_shape).astype(np.float64)
    if null is not None:
        [x, y, dy][null][...] = 0
    if op == "mul":
        out, gx, gy = x * y, dy * y, dy * x
    else:
        t = np.tanh(x + 2 * y)
        out, gx = t, dy * (1 - t * t)
        gy = 2 * gx
    gx, gy = np.broadcast_to(gx, out_shape), np.broadcast_to(gy, out_shape)
    return out, [(sum_to(gx, a), sum_to(abs(gx), a)), (sum_to(gy, b), sum_to(abs(gy), b))]


def sum_to(grad: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """numpy's way to the gradient of a broadcast input: sum the broadcast axes away."""
    summed = grad.sum(axis=tuple(range(grad.ndim - len(shape))))
    axes = tuple(i for i, d in enumerate(shape) if d == 1 and summed.shape[i] != 1)
    return summed.sum(axis=axes, keepdims=True).reshape(shape)


CASES = [
    ((16, 64), (64,)), ((64,), (16, 64)), ((37, 13), (13,)), ((3, 5, 7), (7,)),
    ((9, 40), (9, 1)), ((2, 3, 1), (2, 3, 50)), ((1001,), ()), ((), (5, 7)),
    ((4, 1, 3), (1, 1, 1)), ((8, 1, 16), (1, 6, 16)), ((5, 1, 3), (1, 4, 1)), ((7, 1), (1, 9)),
    ((3, 1), (3,)), ((2, 3, 4, 5, 6), (3, 1, 5, 1)), ((0, 3), (3,)), ((4, 0), (1,)), ((0,), ()),
    ((), ()), ((), (1,)), ((100,), (100,)), ((1, 6), (6,)),
]


@pytest.mark.parametrize("null", [None, 0, 1, 2], ids=["all", "null_x", "null_y", "null_grad"])
@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("op", ["mul", "tanh_add"])
def test_loops_match_numpy(driver: Path, dtype: str, op: str, null: int | None) -> None:
    """Every pattern; with `null`, that input is a null pointer (an absent gradient, an input the
    functor does not read) and must read as zeros."""
    np_dtype = np.dtype(np.float32 if dtype == "f32" else np.float64)
    eps = float(np.finfo(np_dtype).eps)
    suffix = "" if null is None else f" null {null}"
    answers = ask(driver, *(f"run {dtype} {op} {spelled(a, b)}{suffix}" for a, b in CASES))
    for (a, b), answer in zip(CASES, answers, strict=True):
        out, grads = reference(op, a, b, np_dtype, null)
        got = np.array(answer["out"], dtype=np.float64).reshape(out.shape)
        np.testing.assert_allclose(got, out, rtol=8 * eps, atol=8 * eps, err_msg=f"{a} {b}")
        for name, shape, (want, magnitude) in zip(("grad_x", "grad_y"), (a, b), grads, strict=True):
            got = np.array(answer[name], dtype=np.float64).reshape(shape)
            assert not np.isnan(got).any(), (a, b, name)
            # float sums in another order than numpy's: error within a few eps of the magnitudes
            assert (abs(got - want) <= 16 * eps * (magnitude + abs(want)) + 8 * eps).all(), \
                (a, b, name, got, want)


def test_broadcast_gradients_of_an_empty_output_are_zero(driver: Path) -> None:
    [answer] = ask(driver, "run f32 mul 0,3;3")
    assert answer["pattern"] == "empty" and answer["out"] == [] and answer["grad_x"] == []
    assert answer["grad_y"] == [0, 0, 0]


def test_float_sums_are_accumulated_in_float_and_stored_once(driver: Path) -> None:
    """A [C] gradient over many rows: float32 results within float32 rounding of the float64
    sum, not the drift of a sum kept in the gradient's own storage."""
    [answer] = ask(driver, "run f32 mul 3000,4;4")
    _, grads = reference("mul", (3000, 4), (4,), np.dtype(np.float32))
    want, magnitude = grads[1]
    got = np.array(answer["grad_y"])
    assert (abs(got - want) <= 1e-5 * magnitude).all()


def test_int_divider_matches_division(driver: Path) -> None:
    [answer] = ask(driver, "divider")
    assert answer == {"wrong32": 0, "wrong64": 0}


# ---- the GPU bench compiles --------------------------------------------------------------------

@pytest.mark.skipif(_nvcc() is None, reason="needs nvcc")
def test_gpu_bench_compiles_for_sm_90(tmp_path: Path) -> None:
    nvcc = _nvcc()
    assert nvcc is not None
    result = subprocess.run([nvcc, "-std=c++17", "-arch=sm_90", f"-I{CSRC}", f"-I{COMMON_CSRC}",
                             "-c", str(BENCH),
                             "-o", str(tmp_path / "broadcast_bench.o")],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr[-3000:]


_ROW_PASS_PROBE = """
#include <cuda_fp16.h>
#include "opgen/broadcast.cuh"
template <typename MT>
struct MulGrad {
  OPGEN_HD void operator()(MT x, MT y, MT grad_out, MT& grad_x, MT& grad_y) const {
    grad_x = grad_out * y;
    grad_y = grad_out * x;
  }
};
template void opgen::cuda::LaunchRowBackward<__half, MulGrad<float>, 3, 2>(
    const MulGrad<float>&, const opgen::BroadcastPlan<3>&, const opgen::Pointers<const __half, 3>&,
    const opgen::Pointers<__half, 2>&, cudaStream_t);
"""


@pytest.mark.skipif(_nvcc() is None, reason="needs nvcc")
def test_row_pass_with_one_per_row_input_holds_few_registers(tmp_path: Path) -> None:
    """The [N, 1] gradient's pass takes its one per-row input as a template argument: with the
    run-time flags it held every input's vector, 53 registers in float16, and ran at 0.75 of the
    copy on the H200; with the input known, 32 registers and 0.95 (docs/benchmarks.md, round 21).
    ptxas for sm_90 must keep the specialized 16-byte kernels well below the run-time one."""
    nvcc = _nvcc()
    assert nvcc is not None
    source = tmp_path / "row_pass.cu"
    source.write_text(_ROW_PASS_PROBE)
    result = subprocess.run([nvcc, "-std=c++17", "-O3", "-arch=sm_90", "-cubin", "-Xptxas", "-v",
                             f"-I{CSRC}", f"-I{COMMON_CSRC}", str(source),
                             "-o", str(tmp_path / "row_pass.cubin")],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    # "Compiling entry function '_ZN5opgen4cuda13RowPassKernelILi8ELb0ELj2E...'" and then the
    # kernel's "Used N registers": <vector, block per row, mask>
    registers: dict[tuple[str, str], int] = {}
    kernel = None
    for line in result.stderr.splitlines():
        if "Compiling entry function" in line:
            match = re.search(r"RowPassKernelILi(\d+)ELb\dELj(\d+)E", line)
            kernel = (match.group(1), match.group(2)) if match else None
        elif kernel is not None and (used := re.search(r"Used (\d+) registers", line)):
            registers[kernel] = max(registers.get(kernel, 0), int(used.group(1)))
            kernel = None
    runtime = registers[("8", str(0xFFFFFFFF))]
    known = [count for (vec, mask), count in registers.items()
             if vec == "8" and mask != str(0xFFFFFFFF)]
    assert len(known) == 3, registers  # one kernel per input that may be the [N, 1] one
    assert max(known) <= 40 < runtime, registers
