"""The row-wise runtime (issue 13) on the CPU: opgen/rowwise.h's loop over rows, driven by
tests/cpp/rowwise_runtime.cc with the ops of scripts/gpu/rowwise_ops.h (softmax, rms_norm,
layer_norm, forward and backward) and compared with numpy in float64; and the GPU bench
(scripts/gpu/rowwise_bench.cu, which runs on an H200) compiled with nvcc where there is one."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
INCLUDES = [f"-I{ROOT / 'templates' / 'common' / 'csrc'}",
            f"-I{ROOT / 'templates' / 'rowwise' / 'csrc'}", f"-I{ROOT / 'scripts' / 'gpu'}"]
DRIVER = ROOT / "tests" / "cpp" / "rowwise_runtime.cc"
BENCH = ROOT / "scripts" / "gpu" / "rowwise_bench.cu"
GPP = shutil.which("g++")
FLAGS = ["-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror"]


def _nvcc() -> str | None:
    home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    return shutil.which("nvcc") or next(
        (str(p) for p in (Path(home) / "bin" / "nvcc",) if p.exists()), None)


def build(out: Path, *extra: str) -> Path:
    subprocess.run([GPP, *FLAGS, *extra, *INCLUDES, str(DRIVER), "-o", str(out)],
                   check=True, capture_output=True, text=True)
    return out


def run_program(source: Path, *flags: str) -> str:
    """``source`` built with the driver's flags (and ``flags``) and run: its standard output."""
    binary = source.with_suffix("")
    subprocess.run([GPP, *FLAGS, *flags, *INCLUDES, str(source), "-o", str(binary)], check=True,
                   capture_output=True, text=True)
    return subprocess.run([str(binary)], capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if GPP is None:
        pytest.skip("needs g++")
    return build(tmp_path_factory.mktemp("rowwise") / "rowwise_runtime")


def ask(driver: Path, *commands: str) -> list[dict]:
    """The driver's JSON answer to each command."""
    result = subprocess.run([str(driver)], input="".join(c + "\n" for c in commands),
                            capture_output=True, text=True, check=True)
    return [json.loads(line) for line in result.stdout.splitlines()]


# ---- numpy references --------------------------------------------------------------------------

def value(k: int, count: int) -> np.ndarray:
    """Value() in rowwise_runtime.cc."""
    i = np.arange(count, dtype=np.int64)
    return ((i * 7919 + k * 104729) % 2003) / 1001.0 - 1.0


def inputs(rows: int, cols: int, dtype: np.dtype, special: bool = False):
    """x, weight, bias, grad_out as the driver makes them, rounded to dtype, in float64."""
    def cast(a: np.ndarray) -> np.ndarray:
        return a.astype(dtype).astype(np.float64)
    x = cast(value(0, rows * cols)).reshape(rows, cols)
    g = cast(value(2, rows * cols)).reshape(rows, cols)
    w = cast(1 + value(1, cols) / 2)
    b = cast(value(3, cols))
    if special and rows >= 2 and cols >= 1:
        x[0] = -np.inf
        x[1, cols // 2] = np.nan
    return x, w, b, g


def reference(op: str, rows: int, cols: int, dtype: np.dtype, answer: dict, special: bool):
    """(out, [per-row outputs], [(column sum, sum of its terms' magnitudes)]) in float64; a
    backward's out, and a per-row output whose terms cancel, is (value, the magnitude of its
    terms)."""
    x, w, b, g = inputs(rows, cols, dtype, special and op.startswith("softmax"))
    saved = [np.array(s, dtype=np.float64) for s in answer["saved"]]
    with np.errstate(invalid="ignore", divide="ignore"):
        if op == "softmax":
            z = 0.75 * x
            e = np.exp(z - z.max(axis=1, keepdims=True, initial=-np.inf))
            return e / e.sum(axis=1, keepdims=True), [], []
        if op == "softmax_grad":
            y = saved[0].reshape(rows, cols)
            d = (y * g).sum(axis=1, keepdims=True)
            return 0.75 * y * (g - d), [], []
        if op == "rms_norm":
            rstd = 1 / np.sqrt((x * x).sum(axis=1) / cols + 1e-6)
            return x * rstd[:, None] * w, [rstd], []
        if op == "rms_norm_grad":
            r = saved[0][:, None]
            c = (g * w * x).sum(axis=1, keepdims=True) / cols
            terms = g * x * r
            out = (r * (g * w - x * r * r * c), r * (abs(g * w) + abs(x * r * r * c)))
            return out, [], [(terms.sum(0), abs(terms).sum(0))]
        if op == "layer_norm":
            mean = x.sum(axis=1) / cols
            var = ((x - mean[:, None]) ** 2).sum(axis=1) / cols
            rstd = 1 / np.sqrt(var + 1e-5)
            # the mean's terms cancel: its error scales with their magnitude, not with it
            return ((x - mean[:, None]) * rstd[:, None] * w + b,
                    [(mean, abs(x).sum(axis=1) / cols), rstd], [])
        if op == "layer_norm_grad":
            m, r = saved[0][:, None], saved[1][:, None]
            xh = (x - m) * r
            a = (g * w).sum(axis=1, keepdims=True) / cols
            c = (g * w * xh).sum(axis=1, keepdims=True) / cols
            return ((r * (g * w - a - xh * c), r * (abs(g * w) + abs(a) + abs(xh * c))), [],
                    [((g * xh).sum(0), abs(g * xh).sum(0)), (g.sum(0), abs(g).sum(0))])
    raise AssertionError(op)


EPS = {"f32": float(np.finfo(np.float32).eps), "f64": float(np.finfo(np.float64).eps)}
DTYPES = {"f32": np.dtype(np.float32), "f64": np.dtype(np.float64)}


def assert_close(got: list, want: np.ndarray, eps: float, what: str, magnitude=None) -> None:
    got_a = np.array(got, dtype=np.float64).reshape(want.shape)
    assert np.array_equal(np.isnan(got_a), np.isnan(want)), what
    ok = ~np.isnan(want)
    scale = float(np.max(abs(want[ok]), initial=0.0))
    tol = 64 * eps * (abs(want[ok]) + scale)
    if magnitude is not None:
        tol = tol + 64 * eps * magnitude[ok]
    assert (abs(got_a[ok] - want[ok]) <= tol).all(), (what, got_a, want)


SHAPES = [(5, 1), (9, 7), (33, 128), (17, 1000), (6, 4096), (3, 32768), (0, 128), (0, 0), (4, 0),
          (300, 257), (700, 96)]
OPS = ["softmax", "softmax_grad", "rms_norm", "rms_norm_grad", "layer_norm", "layer_norm_grad"]


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("op", OPS)
def test_ops_match_numpy(driver: Path, op: str, dtype: str) -> None:
    answers = ask(driver, *(f"run {dtype} {op} {r} {c} special" for r, c in SHAPES))
    for (rows, cols), answer in zip(SHAPES, answers, strict=True):
        where = f"{op} {dtype} {rows}x{cols}"
        out, row_outs, col_sums = reference(op, rows, cols, DTYPES[dtype], answer, True)
        if isinstance(out, tuple):
            assert_close(answer["out"], out[0], EPS[dtype], where, out[1])
        else:
            assert_close(answer["out"], out, EPS[dtype], where)
        assert len(answer["rows"]) == len(row_outs), where
        for got, want in zip(answer["rows"], row_outs, strict=True):
            want, magnitude = want if isinstance(want, tuple) else (want, None)
            assert_close(got, want, EPS[dtype], where + " per-row", magnitude)
        assert len(answer["cols"]) == len(col_sums), where
        for got, (want, magnitude) in zip(answer["cols"], col_sums, strict=True):
            assert_close(got, want, EPS[dtype], where + " column sum", magnitude)


def test_softmax_of_an_all_minus_inf_row_is_nan_and_a_nan_spreads_over_its_row(
        driver: Path) -> None:
    [answer] = ask(driver, "run f32 softmax 3 5 special")
    out = np.array(answer["out"]).reshape(3, 5)
    assert np.isnan(out[:2]).all() and not np.isnan(out[2]).any()
    assert out[2].sum() == pytest.approx(1, abs=1e-6)


def test_empty_rows_give_nan_mean_and_statistics(driver: Path) -> None:
    [norm, rms] = ask(driver, "run f64 layer_norm 2 0", "run f64 rms_norm 3 0")
    assert norm["out"] == [] and np.isnan(norm["rows"]).all() and len(norm["rows"][0]) == 2
    assert np.isnan(rms["rows"][0]).all() and len(rms["rows"][0]) == 3


def test_column_sums_of_no_rows_are_zeros(driver: Path) -> None:
    [norm, rms] = ask(driver, "run f32 layer_norm_grad 0 6", "run f32 rms_norm_grad 0 3")
    assert norm["cols"] == [[0] * 6, [0] * 6] and rms["cols"] == [[0] * 3]


def test_float_column_sums_keep_float_accuracy_over_many_rows(driver: Path) -> None:
    """20000 rows of a [C] gradient: within a few float32 ulps of the magnitudes (chunked sums), not
    the drift of one running float sum."""
    [answer] = ask(driver, "run f32 layer_norm_grad 20000 8")
    _, _, [(want_w, mag_w), (want_b, mag_b)] = reference(
        "layer_norm_grad", 20000, 8, DTYPES["f32"], answer, False)
    assert (abs(np.array(answer["cols"][0]) - want_w) <= 4e-6 * mag_w).all()
    assert (abs(np.array(answer["cols"][1]) - want_b) <= 4e-6 * mag_b).all()


@pytest.mark.parametrize("op", ["softmax_grad", "rms_norm_grad", "layer_norm_grad"])
@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_an_absent_output_gradient_reads_as_zeros(driver: Path, op: str, dtype: str) -> None:
    """grad_out passed as null reads as a row of zeros the loop provides; zeros in memory are
    read where they are: the same bits, every gradient zero."""
    shapes = [(33, 128), (17, 1000), (3, 5), (300, 257), (0, 8), (4, 0)]
    absent = ask(driver, *(f"run {dtype} {op} {r} {c} nograd" for r, c in shapes))
    zeros = ask(driver, *(f"run {dtype} {op} {r} {c} zerograd" for r, c in shapes))
    assert absent == zeros
    for (rows, cols), answer in zip(shapes, absent, strict=True):
        assert answer["out"] == [0] * (rows * cols)
        assert answer["cols"] == [[0] * cols] * len(answer["cols"])


def _outputs(binary: Path, commands: list[str], threads: int) -> str:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    return subprocess.run([str(binary)], input="\n".join(commands) + "\n", capture_output=True,
                          text=True, check=True, env=env).stdout


def test_thread_counts_give_the_same_bits(driver: Path, tmp_path: Path) -> None:
    """Rows on 1, 2 and 3 threads (OMP_NUM_THREADS, which the loop reads as Paddle's setting), and
    built with -fopenmp (the thread count then from the OpenMP runtime): the column sums' order
    depends only on rows and cols, so every printed digit is the same."""
    commands = ["run f32 layer_norm_grad 5000 40", "run f32 rms_norm_grad 3001 7",
                "run f64 softmax_grad 999 33", "run f32 layer_norm 777 100",
                "run f32 softmax 3000 300", "run f32 layer_norm_grad 300 2000 nograd"]
    serial = _outputs(driver, commands, 1)
    assert serial == _outputs(driver, commands, 2) == _outputs(driver, commands, 3)
    try:
        openmp = build(tmp_path / "rowwise_omp", "-fopenmp")
    except subprocess.CalledProcessError as error:
        pytest.skip(f"no OpenMP: {error.stderr[-200:]}")
    assert serial == _outputs(openmp, commands, 4)


def test_a_lambda_with_the_wrong_number_of_results_fails_to_compile(tmp_path: Path) -> None:
    if GPP is None:
        pytest.skip("needs g++")
    source = tmp_path / "wrong.cc"
    source.write_text("""
#include "opgen/rowwise.h"
struct TwoOutputs {
  template <class Row> void operator()(Row& row) const {
    row.put([&](float x) { return x; });  // the op has two per-element outputs
  }
};
int main() {
  float x[2] = {}, a[2], b[2];
  opgen::rowwise::Pointers<float, 1, 2> p;
  p.in[0] = x; p.out[0] = a; p.out[1] = b; p.rows = 1; p.cols = 2;
  opgen::rowwise::RunCpu<TwoOutputs, opgen::rowwise::Elem>(TwoOutputs{}, p);
}
""")
    result = subprocess.run([GPP, *FLAGS, *INCLUDES, "-c", str(source), "-o",
                             str(tmp_path / "wrong.o")], capture_output=True, text=True)
    assert result.returncode != 0
    assert "row.put: the lambda returns a different number of values" in result.stderr


def test_several_values_reduced_at_once_have_the_bits_of_one_at_a_time(tmp_path: Path) -> None:
    """row.sum / mean / max / min of a lambda returning opgen::Array (what the generator writes
    for independent reductions of one kind) against each value's reduction on its own, over rows
    with NaN, infinities and signed zeros: the same bits, in float and double."""
    if GPP is None:
        pytest.skip("needs g++")
    source = tmp_path / "fused.cc"
    source.write_text("""
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>
#include "opgen/rowwise.h"
template <typename T>
struct Fused {
  using Acc = opgen::OpMathT<T>;
  static constexpr int kReduceWidth = 3;
  template <class Row> void operator()(Row& row) const {
    using A3 = opgen::Array<Acc, 3>;
    using A2 = opgen::Array<Acc, 2>;
    const A3 s = row.sum([&](Acc x) -> A3 { return {x, x * x, Acc(1) / (x + Acc(3))}; });
    const A2 m = row.mean([&](Acc x) -> A2 { return {x * Acc(0.5), -x}; });
    const A2 hi = row.max([&](Acc x) -> A2 { return {x, -x * x}; });
    const A2 lo = row.min([&](Acc x) -> A2 { return {x, x - Acc(1)}; });
    row.put_rows(s[0], s[1], s[2], m[0], m[1], hi[0], hi[1], lo[0], lo[1],
                 row.sum([&](Acc x) { return x; }), row.sum([&](Acc x) { return x * x; }),
                 row.sum([&](Acc x) { return Acc(1) / (x + Acc(3)); }),
                 row.mean([&](Acc x) { return x * Acc(0.5); }), row.mean([&](Acc x) { return -x; }),
                 row.max([&](Acc x) { return x; }), row.max([&](Acc x) { return -x * x; }),
                 row.min([&](Acc x) { return x; }), row.min([&](Acc x) { return x - Acc(1); }));
  }
};
template <typename T>
int Mismatches(int rows, int cols) {
  std::vector<T> x(static_cast<std::size_t>(rows) * cols);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = T(((i * 7919) % 2003) / 1001.0 - 1.0);
  const T special[] = {T(NAN), T(INFINITY), -T(INFINITY), T(-0.0), T(0.0)};
  for (int r = 1; r < rows && r <= 5 && cols > 0; ++r) {
    x[static_cast<std::size_t>(r) * cols] = special[r - 1];
  }
  std::vector<std::vector<T>> outs(18, std::vector<T>(rows));
  opgen::rowwise::Pointers<T, 1, 0, 18> p;
  p.in[0] = x.data();
  for (int k = 0; k < 18; ++k) p.row_out[k] = outs[k].data();
  p.rows = rows;
  p.cols = cols;
  opgen::rowwise::RunCpu<Fused<T>, opgen::rowwise::Elem>(Fused<T>{}, p);
  int bad = 0;
  for (int k = 0; k < 9; ++k) {
    bad += std::memcmp(outs[k].data(), outs[k + 9].data(), rows * sizeof(T)) != 0;
  }
  return bad;
}
int main() {
  int bad = 0;
  for (int cols : {0, 1, 7, 31, 32, 33, 1000, 4099}) {
    bad += Mismatches<float>(7, cols) + Mismatches<double>(7, cols);
  }
  std::printf("mismatches %d\\n", bad);
  return bad != 0;
}
""")
    assert run_program(source, "-O2") == "mismatches 0\n"


def test_a_lambda_may_return_a_class_that_converts_to_acc(tmp_path: Path) -> None:
    """A hand-written functor's lambdas may return a 16-bit type or another class that converts
    to Acc (only opgen::Array means several values): its sum and its output are that value's."""
    if GPP is None:
        pytest.skip("needs g++")
    source = tmp_path / "boxed.cc"
    source.write_text("""
#include <cstdio>
#include "opgen/rowwise.h"
struct Boxed {  // a class that converts to float, as paddle::float16 does
  float v;
  operator float() const { return v; }
};
struct Sum {
  template <class Row> void operator()(Row& row) const {
    const float s = row.sum([&](float x) { return Boxed{2 * x}; });
    row.put([&](float x) { return Boxed{x + s}; });
    row.put_rows(s);
  }
};
int main() {
  float x[3] = {1, 2, 4}, out[3], total[1];
  opgen::rowwise::Pointers<float, 1, 1, 1> p;
  p.in[0] = x; p.out[0] = out; p.row_out[0] = total; p.rows = 1; p.cols = 3;
  opgen::rowwise::RunCpu<Sum, opgen::rowwise::Elem>(Sum{}, p);
  std::printf("%g %g %g %g\\n", total[0], out[0], out[1], out[2]);
}
""")
    assert run_program(source) == "14 15 16 18\n"


# ---- the GPU bench compiles --------------------------------------------------------------------

@pytest.mark.skipif(_nvcc() is None, reason="needs nvcc")
def test_a_gpu_reduction_wider_than_kreducewidth_fails_to_compile(tmp_path: Path) -> None:
    """The GPU sizes a kernel's reductions' shared memory by the functor's kReduceWidth (1 when
    it states none): a reduction of more values at once is refused at compile time, by name."""
    nvcc = _nvcc()
    assert nvcc is not None
    source = tmp_path / "wide.cu"
    source.write_text("""
#include "opgen/rowwise.cuh"
struct TwoAtOnce {  // states no kReduceWidth
  template <class Row> __host__ __device__ void operator()(Row& row) const {
    const opgen::Array<float, 2> s = row.sum([&](float x) -> opgen::Array<float, 2> {
      return {x, x * x};
    });
    row.put_rows(s[0], s[1]);
  }
};
cudaError_t Launch(const opgen::rowwise::Pointers<float, 1, 0, 2>& p, cudaStream_t stream) {
  return opgen::rowwise::Run<TwoAtOnce, opgen::rowwise::Elem>(TwoAtOnce{}, p, nullptr, stream);
}
""")
    result = subprocess.run([nvcc, "-std=c++17", "-arch=sm_90", *INCLUDES[:2], "-c", str(source),
                             "-o", str(tmp_path / "wide.o")], capture_output=True, text=True)
    assert result.returncode != 0
    assert "more values at once than the functor's kReduceWidth" in result.stderr, \
        result.stderr[-3000:]


@pytest.mark.skipif(_nvcc() is None, reason="needs nvcc")
@pytest.mark.parametrize("knobs", [[], ["-DOPGEN_ROW_PDL=0"]], ids=["default", "plain-sums"])
def test_gpu_bench_compiles_for_sm_90(tmp_path: Path, knobs: list[str]) -> None:
    """float32 only (ROWWISE_BENCH_FLOAT_ONLY): every schedule of every op, a quarter of the
    build; and with the column sums' second kernel launched the plain way (a knob)."""
    nvcc = _nvcc()
    assert nvcc is not None
    result = subprocess.run([nvcc, "-std=c++17", "-arch=sm_90", "-DROWWISE_BENCH_FLOAT_ONLY",
                             *knobs, *INCLUDES[:2], "-c", str(BENCH),
                             "-o", str(tmp_path / "bench.o")],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "warning" not in result.stderr, result.stderr[-3000:]


_REGISTER_PROBE = """
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include "opgen/rowwise.cuh"
#include "softmax.h"
namespace rw = opgen::rowwise;
template <class F, class P, class... Roles>
cudaError_t RunFor(const F& f, const P& p, rw::RoleList<Roles...>) {
  return rw::Run<F, Roles...>(f, p, nullptr, nullptr);
}
using Io = softmax::BackwardIo;
cudaError_t Go(const rw::Pointers<T, int(std::size(Io::kNames)), Io::kOut, Io::kRowOut,
                                  Io::kColSum>& p) {
  return RunFor(softmax::Backward<T>(1.0), p, Io::Roles{});
}
"""


def _ptxas_usage(nvcc: str, source: Path, *flags: str) -> tuple[int, int]:
    """The registers of every kernel of ``source`` summed, and their spill stores in bytes, as
    ptxas reports them for sm_90."""
    result = subprocess.run([nvcc, "-std=c++17", "-O3", "-arch=sm_90", "-cubin", "-Xptxas", "-v",
                             *flags, *INCLUDES[:2], str(source), "-o", str(source.with_suffix(""))],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    registers = sum(int(n) for n in re.findall(r"Used (\d+) registers", result.stderr))
    spills = sum(int(n) for n in re.findall(r"(\d+) bytes spill stores", result.stderr))
    assert registers > 0, result.stderr[-3000:]
    return registers, spills


@pytest.mark.skipif(_nvcc() is None, reason="needs nvcc")
def test_bfloat16_kernels_hold_about_as_many_registers_as_float16(tmp_path: Path) -> None:
    """A bfloat16 lane is read out of its 32-bit word (LaneOf): CUDA's conversion takes a 16-bit
    register, and with it (OPGEN_ROW_BF16_LANES=0) examples/softmax's bfloat16 backward held 1026
    registers over its kernels and spilled 72 bytes where float16's held 826 and spilled none
    (nvcc 13). The build with the conversion must fail the same bounds, or they prove nothing."""
    nvcc = _nvcc()
    assert nvcc is not None
    source = tmp_path / "probe.cu"
    source.write_text(_REGISTER_PROBE)
    # the generated header beside the probe, so that its opgen/rowwise_op.h is the Paddle-free
    # stand-in (as scripts/gpu/rowwise_examples.sh builds it)
    shutil.copy(ROOT / "examples" / "softmax" / "csrc" / "softmax.h", tmp_path)
    shim = f"-I{ROOT / 'scripts' / 'gpu' / 'rowwise_shim'}"
    half_registers, half_spills = _ptxas_usage(nvcc, source, "-DT=__half", shim)
    bf16_registers, bf16_spills = _ptxas_usage(nvcc, source, "-DT=__nv_bfloat16", shim)
    assert bf16_spills <= half_spills
    assert bf16_registers <= half_registers * 1.05, (bf16_registers, half_registers)
    old_registers, old_spills = _ptxas_usage(nvcc, source, "-DT=__nv_bfloat16", shim,
                                             "-DOPGEN_ROW_BF16_LANES=0")
    assert old_spills > half_spills or old_registers > half_registers * 1.05
