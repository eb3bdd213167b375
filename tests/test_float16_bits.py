"""opgen/math.h's host conversions to the 16-bit dtypes (Float16Bits, BFloat16Bits), which the
CPU kernels of every kind store 16-bit results with (Paddle 2.6.2's own float -> float16 rounds
some ties away from even): compared with numpy's round-to-nearest-even conversion over a sweep
of every float32 bit pattern, and at the edges (ties, subnormals, overflow, inf, NaN)."""

from __future__ import annotations

import shutil
import subprocess
import textwrap
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
COMMON_CSRC = ROOT / "templates" / "common" / "csrc"
GPP = shutil.which("g++")

DRIVER = textwrap.dedent("""
    #include <cstdio>
    #include <vector>
    #include "opgen/math.h"
    // stdin: float32 values; stdout: their float16 bits, then their bfloat16 bits
    int main() {
      std::vector<float> values;
      float v;
      while (std::fread(&v, sizeof v, 1, stdin) == 1) values.push_back(v);
      std::vector<uint16_t> half(values.size()), bf(values.size());
      for (std::size_t i = 0; i < values.size(); ++i) {
        half[i] = opgen::Float16Bits(values[i]);
        bf[i] = opgen::BFloat16Bits(values[i]);
      }
      std::fwrite(half.data(), sizeof(uint16_t), half.size(), stdout);
      std::fwrite(bf.data(), sizeof(uint16_t), bf.size(), stdout);
    }
""")


@pytest.fixture(scope="module")
def convert(tmp_path_factory: pytest.TempPathFactory):
    if GPP is None:
        pytest.skip("needs g++")
    folder = tmp_path_factory.mktemp("float16")
    (folder / "driver.cc").write_text(DRIVER)
    binary = folder / "driver"
    subprocess.run([GPP, "-std=c++17", "-O2", "-Wall", "-Wextra", "-Werror", f"-I{COMMON_CSRC}",
                    str(folder / "driver.cc"), "-o", str(binary)],
                   check=True, capture_output=True, text=True)

    def run(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        out = subprocess.run([str(binary)], input=values.astype(np.float32).tobytes(),
                             capture_output=True, check=True).stdout
        bits = np.frombuffer(out, dtype=np.uint16)
        return bits[:values.size], bits[values.size:]

    return run


def _float16_matches_numpy(values: np.ndarray, got: np.ndarray) -> None:
    want = values.astype(np.float16).view(np.uint16)
    nan = np.isnan(values)
    got_nan = ((got & 0x7C00) == 0x7C00) & ((got & 0x3FF) != 0)
    assert np.array_equal(got_nan, nan), "NaN must stay NaN, and only NaN"
    wrong = np.flatnonzero((got != want) & ~nan)
    assert wrong.size == 0, [(float(values[i]), hex(got[i]), hex(want[i])) for i in wrong[:5]]


def test_float16_rounds_to_nearest_even_over_every_float32_pattern_sampled(convert) -> None:
    patterns = np.arange(0, 2**32, 4099, dtype=np.uint64).astype(np.uint32)
    values = patterns.view(np.float32)
    with np.errstate(over="ignore"):
        half, _ = convert(values)
        _float16_matches_numpy(values, half)


def test_float16_edges(convert) -> None:
    ulp = np.float32(2.0 ** -11)  # half an ulp of float16 at 1: exactly halfway from 1
    edges = np.array([
        0.0, -0.0, 1.0 + ulp, 1.0 + 3 * ulp, -(1.0 + ulp),  # ties: down to 1, up to 1 + 2^-9
        2.0 ** -24, 2.0 ** -25, 3 * 2.0 ** -26, 2.0 ** -26, 3.6e-26, 1e-45,  # subnormal, zero
        6.1e-5, 65504.0, 65519.0, 65520.0, 1e6, -1e6,  # the last normal, overflow to inf
        np.inf, -np.inf, np.nan, -np.nan,
    ], dtype=np.float32)
    with np.errstate(over="ignore"):
        half, _ = convert(edges)
        _float16_matches_numpy(edges, half)
    assert half[1] == 0x8000 and half[15] == 0x7C00 and half[16] == 0xFC00


def test_bfloat16_rounds_to_nearest_even(convert) -> None:
    patterns = np.arange(0, 2**32, 4099, dtype=np.uint64).astype(np.uint32)
    values = patterns.view(np.float32)
    _, bf = convert(values)
    bits = patterns.astype(np.uint64)
    want = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(values)
    assert np.array_equal(bf[nan], np.full(nan.sum(), 0x7FFF, np.uint16))
    assert np.array_equal(bf[~nan], want[~nan])
    # ties go to even: 1 + 2^-8 is halfway between 1 and 1 + 2^-7
    _, tie = convert(np.array([1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8], np.float32))
    assert list(tie) == [0x3F80, 0x3F82]
