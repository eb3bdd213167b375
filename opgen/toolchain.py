"""Finding the toolchain a build needs: Paddle, the CUDA toolkit, nvcc and the GPU's arch.

Everything here is a read-only probe of the machine (the Paddle probe keeps its answer in
:func:`cache_dir`); :mod:`opgen.build` turns the answers into compiler flags and
:mod:`opgen.doctor` into a report.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from .names import paddle_version


@dataclass(frozen=True)
class PaddleInfo:
    """What the installed Paddle is; probed in a subprocess to keep this process free of it."""

    version: str
    with_cuda: bool
    cuda_version: str | None
    gpu_count: int
    gpu_arches: tuple[int, ...]  # compute capability of each visible GPU, e.g. 90


_PROBE = r"""
import json, paddle
info = {"version": paddle.__version__, "with_cuda": paddle.device.is_compiled_with_cuda(),
        "cuda_version": None, "gpu_count": 0, "gpu_arches": []}
if info["with_cuda"]:
    info["cuda_version"] = paddle.version.cuda()
    try:
        n = paddle.device.cuda.device_count()
    except Exception:
        n = 0
    info["gpu_count"] = n
    for i in range(n):
        major, minor = paddle.device.cuda.get_device_capability(i)
        info["gpu_arches"].append(major * 10 + minor)
print("OPGEN-PROBE" + json.dumps(info))
"""


def cache_dir() -> Path:
    """Where opgen keeps what it learned about this machine: ``$XDG_CACHE_HOME/opgen``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "opgen"


def _paddle_fingerprint(version: str) -> str | None:
    """What the probe's answer depends on, hashed: this interpreter, the installed Paddle (its
    version and the mtime of its files, which a reinstall changes) and the GPUs it can see.

    None when the Paddle package cannot be found without importing it.
    """
    try:
        spec = importlib.util.find_spec("paddle")
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    init = Path(spec.origin)
    try:
        stamps = [init.stat().st_mtime_ns, init.parent.stat().st_mtime_ns]
    except OSError:
        return None
    gpus = sorted(p.name for p in Path("/dev").glob("nvidia[0-9]*"))
    driver = Path("/proc/driver/nvidia/version")
    data = {
        "python": sys.executable, "prefix": sys.prefix, "paddle": version, "where": str(init),
        "stamps": stamps, "gpus": gpus,
        "driver": driver.read_text(errors="replace") if driver.is_file() else None,
        **{var: os.environ.get(var) for var in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES")},
    }
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def _probe_paddle() -> PaddleInfo | None:
    """Ask Paddle what it is, in a subprocess (importing it takes a second or more)."""
    env = dict(os.environ, GLOG_minloglevel="3")
    proc = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True,
                          env=env, check=False)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("OPGEN-PROBE")), None)
    if proc.returncode != 0 or line is None:
        return None
    data = json.loads(line[len("OPGEN-PROBE"):])
    return PaddleInfo(version=data["version"], with_cuda=data["with_cuda"],
                      cuda_version=data["cuda_version"], gpu_count=data["gpu_count"],
                      gpu_arches=tuple(data["gpu_arches"]))


@functools.lru_cache(maxsize=1)
def paddle_info() -> PaddleInfo | None:
    """The installed Paddle, or None when ``import paddle`` fails in this interpreter.

    Importing Paddle costs a second or more, which would dominate an unchanged build, so the
    answer is kept under :func:`cache_dir` keyed by :func:`_paddle_fingerprint`: a reinstalled
    Paddle, another interpreter or a different set of visible GPUs asks again.
    """
    version = paddle_version()
    if version is None:
        return None
    fingerprint = _paddle_fingerprint(version)
    cache = cache_dir() / f"paddle-info-{fingerprint}.json" if fingerprint else None
    if cache is not None and cache.is_file():
        try:
            data = json.loads(cache.read_text())
            return PaddleInfo(**{**data, "gpu_arches": tuple(data["gpu_arches"])})
        except (OSError, ValueError, TypeError, KeyError):
            pass  # a damaged cache entry is probed again and rewritten
    info = _probe_paddle()
    if info is not None and cache is not None:
        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
            tmp = cache.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(asdict(info)))
            tmp.replace(cache)  # atomic: concurrent builds read a whole file or none
        except OSError:
            pass  # an unwritable cache only costs the next run a probe
    return info


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
    """
    for var in ("CUDA_HOME", "CUDA_PATH"):
        value = os.environ.get(var)
        if value and (Path(value) / "bin" / "nvcc").exists():
            return Path(value)
    found = shutil.which("nvcc")
    if found:
        root = _real_nvcc(Path(found)).parent.parent
        if (root / "include" / "cuda_runtime.h").exists():
            return root
    default = Path("/usr/local/cuda")
    if (default / "bin" / "nvcc").exists():
        return default
    return None


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
    info = paddle_info()
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
