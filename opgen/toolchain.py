"""Finding the toolchain a build needs: the CUDA toolkit, nvcc and the GPUs' arches.

Everything here is a read-only look at the machine (Paddle itself is asked by
:mod:`opgen.probe`); :mod:`opgen.build` turns the answers into compiler flags and
:mod:`opgen.doctor` into a report.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from pathlib import Path

from . import probe


def _real_nvcc(nvcc: Path) -> Path:
    """Follow symlinks and one-line ``exec .../nvcc`` wrapper scripts to the real nvcc."""
    nvcc = nvcc.resolve()
    try:
        head = nvcc.read_bytes()[:4096]
    except OSError:
        return nvcc
    if head.startswith(b"#!"):
        match = re.search(rb"exec\s+(\S*/bin/nvcc)\b", head)
        if match:
            return Path(match.group(1).decode()).resolve()
    return nvcc


@functools.lru_cache(maxsize=1)
def cuda_home() -> Path | None:
    """The CUDA toolkit root: $CUDA_HOME / $CUDA_PATH, else found from nvcc, else /usr/local/cuda.

    nvcc on PATH may be a wrapper script (as /usr/local/bin/nvcc is here); Paddle would then guess
    /usr/local as the toolkit and miss cuda_runtime.h, so the wrapper is followed to the real one.
    The root is resolved (``/usr/local/cuda`` -> ``/usr/local/cuda-13.0``), so the build cache's key
    is the same however the toolkit was named. A variable naming a folder without ``bin/nvcc`` is
    passed over here; :func:`misdirected_cuda_variable` reports it.
    """
    for _var, value in _cuda_variables():
        if _has_nvcc(Path(value)):
            return Path(value).resolve()
    found = shutil.which("nvcc")
    if found:
        root = _real_nvcc(Path(found)).parent.parent
        if (root / "include" / "cuda_runtime.h").exists():
            return root
    default = Path("/usr/local/cuda")
    if _has_nvcc(default):
        return default.resolve()
    return None


def misdirected_cuda_variable() -> tuple[str, str] | None:
    """``(name, value)`` of a set $CUDA_HOME or $CUDA_PATH whose folder has no ``bin/nvcc``: a
    typo that :func:`cuda_home` would otherwise pass over for another toolkit."""
    return next(((var, value) for var, value in _cuda_variables()
                 if not _has_nvcc(Path(value))), None)


def _cuda_variables() -> list[tuple[str, str]]:
    """The toolkit variables that are set, in the order they are looked at."""
    return [(var, value) for var in ("CUDA_HOME", "CUDA_PATH") if (value := os.environ.get(var))]


def _has_nvcc(root: Path) -> bool:
    return (root / "bin" / "nvcc").exists()


def nvcc_path() -> Path | None:
    home = cuda_home()
    return home / "bin" / "nvcc" if home else None


@functools.lru_cache(maxsize=1)
def nvcc_version() -> str | None:
    """nvcc's release, e.g. '13.0', or None without nvcc."""
    nvcc = nvcc_path()
    if nvcc is None:
        return None
    try:
        out = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True,
                             check=False, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r"release (\d+\.\d+)", out)
    return match.group(1) if match else None


def cccl_include() -> Path | None:
    """CUDA 13 moved thrust/cub/libcu++ to include/cccl; Paddle's headers expect them there."""
    home = cuda_home()
    if home and (home / "include" / "cccl" / "thrust").is_dir():
        return home / "include" / "cccl"
    return None


def detect_arches() -> tuple[int, ...]:
    """Compute capabilities of the visible GPUs, deduplicated; empty without a GPU."""
    info = probe.paddle_info()
    if info and info.gpu_arches:
        return tuple(sorted(set(info.gpu_arches)))
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "--query-gpu=compute_cap", "--format=csv,noheader"],
                                 capture_output=True, text=True, check=False, timeout=30).stdout
        except (OSError, subprocess.TimeoutExpired):
            return ()
        caps = {int(float(x) * 10 + 0.5) for x in out.split() if re.fullmatch(r"\d+\.\d+", x)}
        return tuple(sorted(caps))
    return ()
