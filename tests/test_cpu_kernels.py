"""The CPU kernels' math and loops without Paddle (issue 15): tests/cpp/cpu_kernels.cc built with
the flags opgen builds ops with. The fast float tanh against tanh rounded to float, the fast float
exp against numpy's, sigmoid against the sigmoid rounded to float; min, max and clamp against
numpy's NaN and signed-zero rules; and the gradient of a broadcast input, summed in blocks over
threads, the same bits whatever the thread count."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from opgen.build import CXX_FLAGS

ROOT = Path(__file__).resolve().parent.parent
DRIVER = ROOT / "tests" / "cpp" / "cpu_kernels.cc"
INCLUDES = [ROOT / "templates" / "elementwise" / "csrc", ROOT / "templates" / "common" / "csrc"]
GPP = shutil.which("g++")


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if GPP is None:
        pytest.skip("needs g++")
    binary = tmp_path_factory.mktemp("cpu_kernels") / "cpu_kernels"
    subprocess.run([GPP, *CXX_FLAGS, "-Wall", "-Werror", *(f"-I{i}" for i in INCLUDES),
                    str(DRIVER), "-o", str(binary), "-pthread"],
                   check=True, capture_output=True, text=True)
    return binary


def ask(driver: Path, *args: str, threads: int | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)
    result = subprocess.run([str(driver), *args], capture_output=True, text=True, check=True,
                            env=env)
    return json.loads(result.stdout)


def test_fast_tanh_is_within_2_ulp_of_tanh(driver: Path) -> None:
    # every 4099th float in [-12, 12] (about 530,000 of them; all 2^31 were checked once: 2 ulp)
    got = ask(driver, "tanh", "4099")
    assert got["worst_ulp"] <= 2, got
    assert got["minus_zero"] and got["nan"], got
    assert (got["inf"], got["minus_inf"]) == (1.0, -1.0)


def test_fast_exp_is_within_1_25_ulp_of_exp(driver: Path) -> None:
    """opgen::exp(float) on the host against numpy's float64 exp: every 16411th float in
    [-104, 89] (about 137,000; all were checked once: 1.22 ulp), and the special values."""
    got = ask(driver, "exp", "16411")
    x = np.array(got["x"], dtype=np.uint32).view(np.float32)
    e = np.array(got["exp"], dtype=np.uint32).view(np.float32)
    assert len(x) > 100_000
    with np.errstate(over="ignore"):
        want = np.exp(x.astype(np.float64))
        rounded = want.astype(np.float32)
    nan = np.isnan(x)
    assert np.isnan(e[nan]).all()
    big = ~nan & np.isinf(rounded)
    assert (e[big] == np.inf).all(), x[big][e[big] != np.inf]
    finite = ~nan & ~big
    ulps = np.abs(e[finite].astype(np.float64) - want[finite]) / np.spacing(rounded[finite])
    worst = int(np.argmax(ulps))
    assert ulps[worst] <= 1.25, (x[finite][worst], ulps[worst])
    assert e[x == -np.inf][0] == 0 and e[x == -150][0] == 0 and (e[x == 0] == 1).all()


def test_sigmoid_is_within_2_ulp_and_16_bit_forms_are_the_accurate_ones_on_the_host(
        driver: Path) -> None:
    """opgen::sigmoid(float) (through opgen::exp: vectorized, not a libm call per element) over
    every 4099th float in [-104, 104]; opgen::lowp's tanh and sigmoid, which the GPU computes
    faster for 16-bit dtypes, are the accurate functions bit for bit on the host (lowp::tanh
    once called libm's tanhf per element there: 16-bit tanh ops ran 7-12x slower)."""
    got = ask(driver, "sigmoid", "4099")
    assert got["samples"] > 500_000, got
    assert got["worst_ulp"] <= 2, got
    assert got["lowp_differ"] == 0, got
    assert (got["inf"], got["minus_inf"], got["nan"]) == (1.0, 0.0, True), got


def test_every_float16_loads_as_numpys_float(driver: Path) -> None:
    """opgen::Float16Value, the CPU loops' branch-free float16 -> float, against numpy's
    conversion over all 65536 float16s: the same bits (subnormals, infinities, NaNs with their
    payloads and signs)."""
    got = np.array(ask(driver, "halves")["bits"], dtype=np.uint32)
    want = np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float32).view(np.uint32)
    differ = np.flatnonzero(got != want)
    assert differ.size == 0, [(hex(h), hex(got[h]), hex(want[h])) for h in differ[:5]]


def test_float16s_load_in_bulk_as_numpy_does(driver: Path) -> None:
    """opgen::cpu::LoadFloat16s, the loops' bulk float16 -> float (F16C where the CPU has it),
    over all 65536 float16s in calls of 13 values: numpy's bits, but that F16C makes a
    signaling NaN quiet; its portable loop (CPUs without F16C) gives numpy's bits exactly."""
    got = ask(driver, "halves-bulk")
    bulk = np.array(got["bulk"], dtype=np.uint32)
    portable = np.array(got["portable"], dtype=np.uint32)
    halves = np.arange(1 << 16, dtype=np.uint16)
    want = halves.view(np.float16).astype(np.float32).view(np.uint32)
    assert (portable == want).all()
    signaling = ((halves & 0x7C00) == 0x7C00) & ((halves & 0x3FF) != 0) & ((halves & 0x200) == 0)
    if got["f16c"]:
        want = np.where(signaling, want | 0x400000, want)
    differ = np.flatnonzero(bulk != want)
    assert differ.size == 0, [(hex(h), hex(bulk[h]), hex(want[h])) for h in differ[:5]]


def test_float16s_store_in_bulk_rounding_to_nearest_even(driver: Path) -> None:
    """opgen::cpu::StoreFloat16s (F16C where the CPU has it) gives opgen::Float16Bits's bits for
    every 263rd float (by bits, NaNs and subnormals included; about 16 million), and those are
    numpy's float16 for every number; a NaN stays a quiet NaN of its sign."""
    got = ask(driver, "stores", "263")
    assert got["samples"] > 16_000_000 and got["differ"] == 0, {**got, "pairs": "..."}
    pairs = np.array(got["pairs"], dtype=np.uint32).reshape(-1, 2)
    x = pairs[:, 0].view(np.float32)
    stored = pairs[:, 1].astype(np.uint16)
    nan = np.isnan(x)
    with np.errstate(over="ignore"):
        want = x[~nan].astype(np.float16).view(np.uint16)
    assert (stored[~nan] == want).all()
    assert nan.sum() > 100 and ((stored[nan] & 0x7E00) == 0x7E00).all()
    assert ((stored[nan] >> 15) == (pairs[nan, 0] >> 31)).all()


@pytest.mark.parametrize("a, b", [("nan", "1"), ("1", "nan"), ("-0", "0"), ("0", "-0"),
                                  ("2", "3"), ("3", "2"), ("-inf", "nan"), ("inf", "-inf"),
                                  ("-0", "-0"), ("0", "0"), ("nan", "0"), ("nan", "-0"),
                                  ("-2", "0"), ("2", "0"), ("-2", "-0"), ("1", "1"),
                                  ("-inf", "0"), ("0", "nan")])
@pytest.mark.parametrize("form", ["", "_uniform"])
def test_min_max_clamp_follow_numpy(driver: Path, a: str, b: str, form: str) -> None:
    # the _uniform forms (b the same for every element: a literal or an attr) are one min or max
    # instruction where b is a number, and must give the same bits as numpy all the same
    got = {k.removesuffix(form): v for k, v in ask(driver, "minmax", a, b).items()
           if k.endswith(form) and (form or "_" not in k)}
    x, y = np.float32(float(a)), np.float32(float(b))
    bits = lambda v: int(np.float32(v).view(np.uint32))  # noqa: E731
    with np.errstate(invalid="ignore"):
        want = {"min": np.minimum(x, y), "max": np.maximum(x, y),
                "clamp": np.minimum(np.maximum(x, y), np.float32(1))}
    for name, value in want.items():
        if np.isnan(value):
            assert np.isnan(np.uint32(got[name]).view(np.float32)), (name, got)
        else:
            assert got[name] == bits(value), (name, got[name], bits(value))


def test_broadcast_gradient_sums_are_the_same_bits_on_any_thread_count(driver: Path) -> None:
    rows, cols = 512, 1024  # 2^19 elements: 8 blocks of the loops
    runs = {n: ask(driver, "gradsums", str(rows), str(cols), threads=n) for n in (1, 2, 3)}
    assert [runs[n]["threads"] for n in (1, 2, 3)] == [1, 2, 3]
    assert runs[1]["grad_bias_bits"] == runs[2]["grad_bias_bits"] == runs[3]["grad_bias_bits"]
    i = np.arange(rows * cols)
    x = np.sin(np.float32(0.37) * (i % 9973).astype(np.float32)).astype(np.float64)
    grad = np.cos(np.float32(0.11) * (i % 7919).astype(np.float32)).astype(np.float64)
    bias = np.float32(0.01) * (np.arange(cols) % 100).astype(np.float32)
    t = np.tanh(x.reshape(rows, cols) + bias)
    want = (grad.reshape(rows, cols) * (1 - t * t)).sum(axis=0)
    np.testing.assert_allclose(runs[1]["grad_bias"], want, rtol=1e-4, atol=1e-3)
