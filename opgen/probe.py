"""The installed Paddle, asked once: one subprocess, its answer kept in memory and on disk.

Paddle is never imported into opgen's own process (importing it takes a second or more and
would tie opgen to it): :func:`ask_paddle` runs one small script in a subprocess of the same
interpreter and reads everything opgen needs from it: the version, CUDA, the GPUs, cuDNN, the C++
ABI, the names of Paddle's built-in ops and of the modules it loads. The answer is cached per
process and under :func:`cache_dir`, keyed by what it depends on, so an unchanged machine never
asks again.
:func:`gpu_run` is the one question never cached: whether Paddle's GPU kernels compute anything
on this GPU now (``opgen doctor``).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path


def cache_dir() -> Path:
    """Where opgen keeps what it learned about this machine: ``$XDG_CACHE_HOME/opgen``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "opgen"


def paddle_version() -> str | None:
    """The installed Paddle's version, read from package metadata (no import of paddle)."""
    for dist in ("paddlepaddle", "paddlepaddle-gpu"):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


@dataclass(frozen=True)
class PaddleInfo:
    """What the installed Paddle is, as it answered :func:`ask_paddle`."""

    version: str
    with_cuda: bool
    cuda_version: str | None
    gpu_count: int
    gpu_arches: tuple[int, ...]  # compute capability of each visible GPU, e.g. 90
    cudnn_version: str | None = None
    cxx11_abi: bool | None = None  # whether Paddle was built with the C++11 ABI; None: unknown
    ops: frozenset[str] = field(default=frozenset(), repr=False)  # its registered op names
    ops_error: str | None = None   # why ``ops`` is empty
    # the top-level modules loaded by importing it, its cpp_extension and pytest
    modules: frozenset[str] = field(default=frozenset(), repr=False)


@dataclass(frozen=True)
class Answer:
    """What :func:`ask_paddle` learned: the installed Paddle, or why it could not tell."""

    info: PaddleInfo | None   # None: Paddle is not installed, or `import paddle` fails
    error: str | None = None  # the last line of the failed import, when it failed


_SCRIPT = r"""
import json, sys
import paddle
info = {"version": paddle.__version__, "with_cuda": bool(paddle.device.is_compiled_with_cuda()),
        "cuda_version": None, "gpu_count": 0, "gpu_arches": [], "cudnn_version": None,
        "cxx11_abi": None, "ops": [], "ops_error": None}
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
try:
    cudnn = paddle.version.cudnn()
    info["cudnn_version"] = None if cudnn in (None, False, "False", "") else str(cudnn)
except Exception:
    pass
try:
    from paddle.base import libpaddle
    if hasattr(libpaddle, "_GLIBCXX_USE_CXX11_ABI"):
        info["cxx11_abi"] = bool(libpaddle._GLIBCXX_USE_CXX11_ABI)
except Exception:
    pass
if info["cxx11_abi"] is None and callable(getattr(paddle, "compiled_with_cxx11_abi", None)):
    info["cxx11_abi"] = bool(paddle.compiled_with_cxx11_abi())
try:
    from paddle.base import core
    names = set(core.get_all_op_names())
    names.update(core._get_all_register_op_kernels("phi"))
    info["ops"] = sorted(names)
except Exception as err:
    lines = [x.strip() for x in str(err).splitlines() if x.strip()]
    info["ops_error"] = type(err).__name__ + (": " + lines[-1][:200] if lines else "")
try:  # what an op's setup.py and tests import too: an op must not shadow any module they load
    import paddle.utils.cpp_extension, pytest
except Exception:
    pass
info["modules"] = sorted({m.split(".")[0] for m in list(sys.modules) if not m.startswith("_")})
print("OPGEN-PROBE" + json.dumps(info), flush=True)
"""


def _fingerprint(version: str) -> str | None:
    """What the answer depends on, hashed: this interpreter, the installed Paddle (its version
    and the mtime of its files, which a reinstall changes) and the GPUs it can see.

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


def _cache_file(version: str) -> Path | None:
    fingerprint = _fingerprint(version)
    return cache_dir() / f"paddle-{fingerprint}.json" if fingerprint else None


def _run(script: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str] | None:
    """Run ``script`` with this interpreter, Paddle's logging quiet; None if it could not run."""
    env = dict(os.environ, GLOG_minloglevel="3", FLAGS_call_stack_level="0")
    try:
        return subprocess.run([sys.executable, "-c", script, *args], capture_output=True,
                              text=True, env=env, check=False, timeout=timeout, errors="replace")
    except (OSError, subprocess.TimeoutExpired):
        return None


def _from_json(data: dict) -> PaddleInfo:
    return PaddleInfo(**{**data, "gpu_arches": tuple(data["gpu_arches"]),
                         "ops": frozenset(data["ops"]),
                         "modules": frozenset(data.get("modules", ()))})


def _probe() -> Answer:
    """Ask Paddle in a subprocess: the one place opgen does."""
    proc = _run(_SCRIPT)
    if proc is None:
        return Answer(None, "the Paddle probe could not run or timed out")
    line = next((x for x in proc.stdout.splitlines() if x.startswith("OPGEN-PROBE")), None)
    if proc.returncode != 0 or line is None:
        lines = [x.strip() for x in proc.stderr.splitlines() if x.strip()]
        return Answer(None, lines[-1] if lines else f"exit code {proc.returncode}, no answer")
    return Answer(_from_json(json.loads(line[len("OPGEN-PROBE"):])))


@functools.lru_cache(maxsize=1)
def ask_paddle() -> Answer:
    """The installed Paddle, asked at most once per process and once per install.

    A complete answer (one holding the op registry) is kept under :func:`cache_dir`; a reinstalled
    Paddle, another interpreter or a different set of visible GPUs asks again. A failed or partial
    answer is never kept, so a repaired install is seen at once.
    """
    version = paddle_version()
    if version is None:
        return Answer(None)
    cache = _cache_file(version)
    if cache is not None and cache.is_file():
        try:
            info = _from_json(json.loads(cache.read_text()))
            if info.ops and info.modules:  # an older opgen's answer has no modules: ask again
                return Answer(info)
        except (OSError, ValueError, TypeError, KeyError):
            pass  # a damaged cache entry is asked again and rewritten
    answer = _probe()
    if answer.info is not None and answer.info.ops and cache is not None:
        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
            tmp = cache.with_suffix(f".{os.getpid()}.tmp")
            data = {**asdict(answer.info), "ops": sorted(answer.info.ops),
                    "modules": sorted(answer.info.modules)}
            tmp.write_text(json.dumps(data))
            tmp.replace(cache)  # atomic: concurrent runs read a whole file or none
        except OSError:
            pass  # an unwritable cache only costs the next run a probe
    return answer


def paddle_info() -> PaddleInfo | None:
    """The installed Paddle, or None when it is missing or ``import paddle`` fails."""
    return ask_paddle().info


@dataclass(frozen=True)
class GpuRun:
    """``paddle.ones([4])`` and ``ones + ones`` on gpu:0, or why that run failed."""

    values: tuple[tuple[float, ...], tuple[float, ...]] | None
    error: str | None = None


_GPU_RUN = r"""
import json
import paddle
print("OPGEN-GPU-RUN-START", flush=True)
try:
    paddle.set_device("gpu:0")
    ones = paddle.ones([4], dtype="float32")
    twos = ones + ones
    run = {"values": [ones.numpy().tolist(), twos.numpy().tolist()]}
except Exception as err:
    lines = [x.strip() for x in str(err).splitlines() if x.strip()]
    run = {"error": type(err).__name__ + (": " + lines[0][:200] if lines else "")}
print("OPGEN-GPU-RUN" + json.dumps(run), flush=True)
"""


def _rows(value: object) -> tuple[tuple[float, ...], tuple[float, ...]] | None:
    """The run's ``[ones, twos]`` as two tuples of floats, or None if it is not that."""
    if not (isinstance(value, list) and len(value) == 2
            and all(isinstance(row, list) for row in value)):
        return None
    ones, twos = (tuple(float(v) for v in row) for row in value)
    return ones, twos


def gpu_run() -> GpuRun | None:
    """A tiny run of Paddle's built-in kernels on gpu:0; None when Paddle cannot be imported.

    It exists because a Paddle without kernels for the GPU's arch does not always fail:
    paddlepaddle-gpu 2.6.2 on an sm_90 H200 returns zeros from every built-in GPU kernel. Never
    cached: it asks about the GPU as it is now.
    """
    proc = _run(_GPU_RUN)
    if proc is None:
        return None
    line = next((x for x in proc.stdout.splitlines() if x.startswith("OPGEN-GPU-RUN{")), None)
    if line is None:
        if "OPGEN-GPU-RUN-START" not in proc.stdout:
            return None  # `import paddle` failed: the report says so elsewhere
        return GpuRun(None, f"the GPU run crashed (exit code {proc.returncode})")
    data = json.loads(line[len("OPGEN-GPU-RUN"):])
    error = data.get("error")
    return GpuRun(_rows(data.get("values")), str(error) if error is not None else None)
