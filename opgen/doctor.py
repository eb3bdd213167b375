"""``opgen doctor``: find what would break a custom-op build before the build does.

Each check is ok / warning / problem with a one-line fix. A *problem* means a build (or the op it
produces) would fail here; a *warning* means something works less well than it could, or is skipped.

Paddle is never imported into this process: :func:`opgen.probe.paddle_info` and
:func:`opgen.probe.gpu_run` ask it in a subprocess running the same interpreter. Every probe is a
plain module-level function, so tests replace it (or put fake tools on PATH) to fake a machine.
"""

from __future__ import annotations

import importlib.util
import io
import json
import mmap
import os
import re
import shutil
import struct
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from functools import cached_property
from pathlib import Path
from typing import Literal

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from . import elf, probe, toolchain

Status = Literal["ok", "warning", "problem"]


@dataclass(frozen=True)
class Check:
    """One line of the report: what was checked, how it went, and what to do about it."""

    name: str
    status: Status
    detail: str
    fix: str | None = None


# --------------------------------------------------------------------------------------------
# Probes: each answers one question about this machine, or None when it cannot tell.


def _run(argv: list[str], *, timeout: float = 60, stdin: str | None = None,
         env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str] | None:
    """Run a tool; None when it is missing, cannot start or hangs."""
    try:
        return subprocess.run(argv, input=stdin, capture_output=True, text=True, check=False,
                              timeout=timeout, env=env)
    except (OSError, subprocess.TimeoutExpired):
        return None


def _version_tuple(version: str | None) -> tuple[int, ...] | None:
    """'12.4' -> (12, 4); None for anything that does not start with a number."""
    match = re.match(r"(\d+(?:\.\d+)*)", version or "")
    return tuple(int(x) for x in match.group(1).split(".")) if match else None


def paddle_dir() -> Path | None:
    """The installed ``paddle`` package directory, found without importing it."""
    try:
        spec = importlib.util.find_spec("paddle")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def paddle_libraries(root: Path) -> list[Path]:
    """Paddle's own shared libraries, the ones that hold its built-in kernels.

    Third-party libraries shipped next to them (flash-attention, warpctc, MKL) are left out:
    flash-attention has sm_80/sm_90 code even in wheels whose own kernels stop at sm_86.
    """
    libs = [root / "base" / "libpaddle.so", root / "fluid" / "libpaddle.so"]
    libs += sorted((root / "libs").glob("libphi*.so*"))
    return [lib for lib in libs if lib.is_file()]


@dataclass(frozen=True)
class KernelImage:
    """The device code in Paddle's libraries: how many modules hold code for each arch.

    A module is one compilation unit's fat binary. ``sass`` maps sm_XX (as XX) to the number of
    modules with a cubin for it, ``ptx`` the same for PTX; ``modules`` is how many there are.
    """

    modules: int
    sass: dict[int, int]
    ptx: dict[int, int]
    source: str  # "cuobjdump" or "fatbin headers"

    def coverage(self, arch: int) -> tuple[float, float]:
        """Share of modules with a cubin that runs on ``arch``, and with PTX it can JIT."""
        if not self.modules:
            return 0.0, 0.0
        # A cubin runs on GPUs of the same major version and an equal or higher minor version;
        # PTX for compute_XX is JIT-compiled by the driver for any GPU of XX or newer.
        sass = max((n for sm, n in self.sass.items() if sm // 10 == arch // 10 and sm <= arch),
                   default=0)
        ptx = max((n for sm, n in self.ptx.items() if sm <= arch), default=0)
        return sass / self.modules, ptx / self.modules

    def main_arches(self, counts: dict[int, int]) -> list[int]:
        """Arches present in at least half of the modules (not one stray third-party module)."""
        return sorted(sm for sm, n in counts.items() if 2 * n >= self.modules)


def cuobjdump_path() -> Path | None:
    """cuobjdump from PATH, else from the CUDA toolkit."""
    found = shutil.which("cuobjdump")
    if found:
        return Path(found)
    home = toolchain.cuda_home()
    if home and (home / "bin" / "cuobjdump").is_file():
        return home / "bin" / "cuobjdump"
    return None


def _cuobjdump_counts(tool: Path, libs: Iterable[Path]) -> KernelImage | None:
    """Count cubins and PTX per arch with ``cuobjdump --list-elf --list-ptx``."""
    sass: Counter[int] = Counter()
    ptx: Counter[int] = Counter()
    for lib in libs:
        proc = _run([str(tool), "--list-elf", "--list-ptx", str(lib)], timeout=300)
        if proc is None:
            return None
        # Lines read "ELF file    2: libphi.2.sm_80.cubin" and "PTX file    1: libphi.1.sm_86.ptx".
        # Arch-specific cubins (sm_90a) sit next to a portable one of the same arch; skipping them
        # keeps the module count below right.
        for line in proc.stdout.splitlines():
            match = re.match(r"\s*(ELF|PTX) file\s+\d+:\s*\S*\.sm_(\d+)\.(cubin|ptx)\s*$", line)
            if match:
                (sass if match.group(1) == "ELF" else ptx)[int(match.group(2))] += 1
    # cuobjdump does not group entries into modules: the most common arch approximates the count.
    modules = max([*sass.values(), *ptx.values()], default=0)
    if not modules:
        return None
    return KernelImage(modules, dict(sass), dict(ptx), source="cuobjdump")


def kernel_image(root: Path) -> KernelImage | None:
    """Which GPU arches Paddle's built-in kernels were compiled for; None if it has no GPU code.

    Uses ``cuobjdump`` where it is installed, else reads the fat binary headers itself.
    """
    libs = paddle_libraries(root)
    if not libs:
        return None
    tool = cuobjdump_path()
    if tool is not None:
        image = _cuobjdump_counts(tool, libs)
        if image is not None:
            return image
    sass: Counter[int] = Counter()
    ptx: Counter[int] = Counter()
    modules = 0
    for lib in libs:
        try:
            for lib_sass, lib_ptx in elf.fatbin_modules(lib):
                modules += 1
                sass.update(lib_sass)
                ptx.update(lib_ptx)
        except (OSError, ValueError, struct.error):
            continue
    if not modules:
        return None
    return KernelImage(modules, dict(sass), dict(ptx), source="fatbin headers")


def library_uses_cxx11_abi(root: Path) -> bool | None:
    """Whether libpaddle.so was built with the C++11 ABI, from its ``std::__cxx11`` symbols."""
    for lib in paddle_libraries(root)[:1]:
        try:
            with lib.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
                return data.find(b"__cxx11") >= 0
        except (OSError, ValueError):
            return None
    return None


@dataclass(frozen=True)
class Gpu:
    """One GPU as nvidia-smi lists it; ``arch`` is the compute capability as XX (9.0 -> 90)."""

    index: int
    name: str
    arch: int | None


@dataclass(frozen=True)
class Driver:
    """What nvidia-smi reports: the GPUs, the driver, and the newest CUDA the driver supports."""

    gpus: tuple[Gpu, ...]
    version: str | None
    cuda_version: str | None
    error: str | None = None  # why nvidia-smi listed nothing


def nvidia_smi() -> Driver | None:
    """Ask nvidia-smi for the GPUs and the driver; None when nvidia-smi is not installed."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    plain = _run([smi], timeout=30)
    if plain is None or plain.returncode != 0:
        text = (plain.stdout + plain.stderr) if plain else "nvidia-smi did not answer"
        first = next((x.strip() for x in text.splitlines() if x.strip()), "no output")
        return Driver(gpus=(), version=None, cuda_version=None, error=first)
    cuda = re.search(r"CUDA Version:\s*(\d+\.\d+)", plain.stdout)
    driver = re.search(r"Driver Version:\s*([\d.]+)", plain.stdout)
    gpus: list[Gpu] = []
    # Drivers older than 510 do not know compute_cap: list the GPUs without it then.
    for fields in ("index,name,compute_cap", "index,name"):
        query = _run([smi, f"--query-gpu={fields}", "--format=csv,noheader"], timeout=30)
        rows = query.stdout.splitlines() if query and query.returncode == 0 else []
        for row in rows:
            parts = [p.strip() for p in row.split(",")]
            if not parts[0].isdigit() or len(parts) < 2:
                continue
            cap = parts.pop() if fields.endswith("compute_cap") else ""
            arch = int(round(float(cap) * 10)) if re.fullmatch(r"\d+\.\d+", cap) else None
            gpus.append(Gpu(index=int(parts[0]), name=", ".join(parts[1:]), arch=arch))
        if gpus:
            break
    return Driver(gpus=tuple(gpus), version=driver.group(1) if driver else None,
                  cuda_version=cuda.group(1) if cuda else None)


def cxx_compiler() -> str:
    """The C++ compiler builds use: $CXX, else g++."""
    return os.environ.get("CXX") or "g++"


def cxx_version(compiler: str) -> str | None:
    """The compiler's full version, e.g. '12.2.0'; None when it is missing or does not answer."""
    proc = _run([compiler, "-dumpfullversion", "-dumpversion"], timeout=30)
    if proc is None or proc.returncode != 0:
        return None
    return proc.stdout.strip().splitlines()[0] if proc.stdout.strip() else None


def cxx_default_abi(compiler: str) -> bool | None:
    """Whether the compiler defaults to the C++11 ABI (``_GLIBCXX_USE_CXX11_ABI`` 1)."""
    proc = _run([compiler, "-x", "c++", "-E", "-dM", "-"], stdin="#include <string>\n",
                timeout=60)
    if proc is None or proc.returncode != 0:
        return None
    match = re.search(r"#define _GLIBCXX_USE_CXX11_ABI (\d)", proc.stdout)
    return match.group(1) == "1" if match else None


def nvcc_max_gcc(home: Path) -> int | None:
    """The newest gcc major nvcc accepts: ``#if __GNUC__ > N`` in the toolkit's host_config.h."""
    try:
        text = (home / "include" / "crt" / "host_config.h").read_text(errors="replace")
    except OSError:
        return None
    limits = [int(n) for n in re.findall(r"#if\s+__GNUC__\s*>\s*(\d+)", text)]
    return max(limits) if limits else None


# --------------------------------------------------------------------------------------------
# Checks: each turns facts into report lines; a fact is probed on first use, once per run.


class Facts:
    """This machine, each fact probed on first use through the module-level probes above."""

    @cached_property
    def paddle_version(self) -> str | None:
        return probe.paddle_version()

    @cached_property
    def paddle(self) -> probe.PaddleInfo | None:
        return probe.paddle_info() if self.paddle_version else None

    @cached_property
    def paddle_dir(self) -> Path | None:
        return paddle_dir() if self.paddle else None

    @cached_property
    def gpu_run(self) -> probe.GpuRun | None:
        if self.paddle is None or not (self.paddle.with_cuda and self.paddle.gpu_count > 0):
            return None
        return probe.gpu_run()

    @cached_property
    def driver(self) -> Driver | None:
        return nvidia_smi()

    @cached_property
    def gpu_arches(self) -> tuple[int, ...]:
        arches = {g.arch for g in self.driver.gpus if g.arch} if self.driver else set()
        if not arches and self.paddle:
            arches = set(self.paddle.gpu_arches)
        return tuple(sorted(arches))

    @cached_property
    def kernels(self) -> KernelImage | None:
        return kernel_image(self.paddle_dir) if self.paddle_dir else None

    @cached_property
    def cuda_home(self) -> Path | None:
        return toolchain.cuda_home()

    @cached_property
    def nvcc_version(self) -> str | None:
        return toolchain.nvcc_version() if self.cuda_home else None

    @cached_property
    def cxx(self) -> str:
        return cxx_compiler()

    @cached_property
    def cxx_version(self) -> str | None:
        return cxx_version(self.cxx) if shutil.which(self.cxx) else None

    @property
    def gpu_build(self) -> bool:
        """Whether builds here compile .cu sources: a CUDA Paddle and a CUDA toolkit."""
        return bool(self.paddle and self.paddle.with_cuda and self.cuda_home)


def _sms(arches: Iterable[int]) -> str:
    return ", ".join(f"sm_{a}" for a in arches) or "none"


def check_paddle(f: Facts) -> Iterator[Check]:
    """The installed Paddle: present, importable, recent enough."""
    if f.paddle_version is None:
        yield Check("Paddle", "problem", f"not installed for {sys.executable}",
                    "pip install paddlepaddle (CPU) or paddlepaddle-gpu (CUDA) into this "
                    "environment")
        return
    if f.paddle is None:
        yield Check("Paddle", "problem",
                    f"paddlepaddle {f.paddle_version} is installed but `import paddle` fails",
                    f"run `{sys.executable} -c 'import paddle'` to see why, then reinstall it")
        return
    where = f"{f.paddle.version} in {sys.prefix}"
    if (_version_tuple(f.paddle.version) or (0,)) < (2, 6):
        yield Check("Paddle", "warning", f"{where}: older than 2.6, which opgen is tested with",
                    "pip install -U paddlepaddle-gpu (or paddlepaddle)")
        return
    yield Check("Paddle", "ok", where, None)


def check_paddle_cuda(f: Facts) -> Iterator[Check]:
    """Whether Paddle is compiled with CUDA, and with which CUDA and cuDNN."""
    if f.paddle is None:
        return
    if not f.paddle.with_cuda:
        if f.gpu_arches:
            yield Check("Paddle CUDA", "warning",
                        "CPU-only Paddle on a machine with a GPU: ops are built for CPU only",
                        "pip install paddlepaddle-gpu to build and run GPU kernels")
        else:
            yield Check("Paddle CUDA", "ok", "CPU-only Paddle: ops are built for CPU only", None)
        return
    cudnn = f.paddle.cudnn_version
    yield Check("Paddle CUDA", "ok",
                f"compiled with CUDA {f.paddle.cuda_version or '?'}, cuDNN {cudnn or '?'}", None)


def check_gpus(f: Facts) -> Iterator[Check]:
    """The GPUs nvidia-smi lists and their compute capability."""
    cpu_fix = "none for CPU-only builds; GPU ops need an NVIDIA GPU and its driver"
    if f.driver is None or not f.driver.gpus:
        if f.paddle and f.paddle.gpu_count:
            yield Check("GPU", "ok", f"{f.paddle.gpu_count} GPU(s) seen by Paddle: "
                        f"{_sms(sorted(set(f.paddle.gpu_arches)))}", None)
            return
        why = ("nvidia-smi not found" if f.driver is None
               else f"nvidia-smi: {f.driver.error or 'no GPU listed'}")
        cuda_paddle = bool(f.paddle and f.paddle.with_cuda)
        yield Check("GPU", "warning", f"no GPU ({why})"
                    + (": GPU kernels compile but cannot run here" if cuda_paddle else ""), cpu_fix)
        return
    groups = Counter((g.name, g.arch) for g in f.driver.gpus)
    detail = "; ".join(f"{n}x {name} ({f'sm_{arch}' if arch else 'compute capability unknown'})"
                       for (name, arch), n in groups.items())
    yield Check("GPU", "ok", detail, None)
    if f.paddle and f.paddle.with_cuda and f.paddle.gpu_count == 0:
        yield Check("GPU", "warning", "nvidia-smi lists GPUs but Paddle sees none",
                    "check CUDA_VISIBLE_DEVICES and that the driver supports Paddle's CUDA")


def _no_kernels_fix(arch: int) -> str:
    return (f"install a paddlepaddle-gpu built for sm_{arch}, or build Paddle from source with "
            f"CUDA_ARCH_BIN={arch} (or with PTX for an older arch)")


def check_paddle_kernels(f: Facts) -> Iterator[Check]:
    """Whether the installed Paddle carries GPU code for each GPU's arch."""
    if not (f.paddle and f.paddle.with_cuda):
        return
    image = f.kernels
    if image is None:
        yield Check("Paddle kernels", "warning",
                    "could not read which GPU arches Paddle's libraries were built for", None)
        return
    ptx_arches = image.main_arches(image.ptx)
    ships = (f"Paddle {f.paddle.version} has {_sms(image.main_arches(image.sass))}"
             f"{', PTX ' + _sms(ptx_arches) if ptx_arches else ' and no PTX'} "
             f"(from {image.source})")
    if not f.gpu_arches:
        yield Check("Paddle kernels", "ok", f"{ships}; no GPU here to compare", None)
        return
    for arch in f.gpu_arches:
        sass, ptx = image.coverage(arch)
        if sass >= 0.99:
            yield Check("Paddle kernels", "ok", f"sm_{arch} covered: {ships}", None)
        elif ptx >= 0.99:
            yield Check("Paddle kernels", "warning",
                        f"sm_{arch} only through PTX, JIT-compiled on first use (slow): {ships}",
                        _no_kernels_fix(arch))
        elif max(sass, ptx) >= 0.5:
            yield Check("Paddle kernels", "warning",
                        f"sm_{arch} code in only {max(sass, ptx):.0%} of modules: {ships}",
                        _no_kernels_fix(arch))
        else:
            yield Check("Paddle kernels", "problem",
                        f"no kernels for sm_{arch}: {ships}; its GPU ops fail or return zeros",
                        _no_kernels_fix(arch))


def check_gpu_run(f: Facts) -> Iterator[Check]:
    """A tiny run of built-in GPU kernels: catches Paddles that silently compute nothing."""
    run = f.gpu_run
    if run is None or (run.values is None and run.error is None):
        return
    arch = f.gpu_arches[0] if f.gpu_arches else None
    fix = _no_kernels_fix(arch) if arch else "reinstall paddlepaddle-gpu for this GPU"
    if run.error is not None:
        yield Check("GPU run", "problem", f"paddle.ones([4]) on gpu:0 failed: {run.error}", fix)
        return
    assert run.values is not None
    ones, twos = run.values
    if list(ones) == [1.0] * 4 and list(twos) == [2.0] * 4:
        yield Check("GPU run", "ok", "paddle.ones([4]) and ones + ones on gpu:0 give 1s and 2s",
                    None)
        return
    got = ", ".join(f"{v:g}" for v in (ones if list(ones) != [1.0] * 4 else twos))
    what = "paddle.ones([4])" if list(ones) != [1.0] * 4 else "ones + ones"
    yield Check("GPU run", "problem",
                f"{what} on gpu:0 returned [{got}]: Paddle's GPU kernels do not run on "
                f"{f'sm_{arch}' if arch else 'this GPU'}", fix)


def check_cuda_toolkit(f: Facts) -> Iterator[Check]:
    """The CUDA toolkit: where it is, nvcc's version, and whether it matches Paddle's CUDA."""
    cuda_paddle = bool(f.paddle and f.paddle.with_cuda)
    home = f.cuda_home
    misdirected = toolchain.misdirected_cuda_variable()
    if misdirected is not None:
        var, value = misdirected
        other = f" ({home} is the toolkit found otherwise)" if home else ""
        yield Check("CUDA toolkit", "problem" if cuda_paddle else "warning",
                    f"{var}={value} has no bin/nvcc{other}",
                    f"point {var} at the CUDA toolkit you mean, or unset it")
        return
    if home is None:
        if cuda_paddle:
            assert f.paddle is not None
            yield Check("CUDA toolkit", "warning",
                        "nvcc not found: Paddle has CUDA, so only `opgen build --cpu-only` "
                        "builds an op; opgen test, opgen.load and the wrappers build the .cu too",
                        f"install the CUDA toolkit (Paddle uses CUDA {f.paddle.cuda_version}) "
                        "and set CUDA_HOME")
        else:
            needed = "CPU-only Paddle" if f.paddle else "CPU-only builds"
            yield Check("CUDA toolkit", "ok", f"not found; not needed for {needed}", None)
        return
    if f.nvcc_version is None:
        status: Status = "problem" if cuda_paddle else "warning"
        yield Check("CUDA toolkit", status, f"{home}/bin/nvcc does not run or print its version",
                    "reinstall the CUDA toolkit or point CUDA_HOME at a working one")
        return
    if not (home / "include" / "cuda_runtime.h").is_file():
        yield Check("CUDA toolkit", "problem" if cuda_paddle else "warning",
                    f"{home}/include/cuda_runtime.h is missing",
                    "install the CUDA toolkit's development headers, or set CUDA_HOME")
        return
    detail = f"{home}, nvcc {f.nvcc_version}"
    if not cuda_paddle:
        unused = "Paddle is CPU-only" if f.paddle else "no Paddle"
        yield Check("CUDA toolkit", "ok", f"{detail} (unused: {unused})", None)
        return
    assert f.paddle is not None
    nvcc_major = (_version_tuple(f.nvcc_version) or (0,))[0]
    paddle_major = (_version_tuple(f.paddle.cuda_version) or (nvcc_major,))[0]
    if nvcc_major != paddle_major:
        yield Check("CUDA toolkit", "warning",
                    f"{detail}, but Paddle is built with CUDA {f.paddle.cuda_version}: op and "
                    "Paddle use different CUDA runtimes",
                    f"if the op fails to load, install CUDA {f.paddle.cuda_version} and set "
                    "CUDA_HOME to it")
        return
    yield Check("CUDA toolkit", "ok", detail, None)


def check_driver(f: Facts) -> Iterator[Check]:
    """Whether the driver supports the CUDA of the toolkit and of Paddle."""
    if f.driver is None or f.driver.version is None:
        return
    detail = f"driver {f.driver.version}, supports CUDA {f.driver.cuda_version or '?'}"
    supported = _version_tuple(f.driver.cuda_version)
    if supported is None:
        yield Check("CUDA driver", "ok", detail, None)
        return
    needs = [("nvcc", f.nvcc_version)]
    if f.paddle and f.paddle.with_cuda:
        needs.append(("Paddle", f.paddle.cuda_version))
    found: list[Check] = []
    for who, version in needs:
        wanted = _version_tuple(version)
        if wanted is None or supported[:2] >= wanted[:2]:
            continue
        fix = (f"upgrade the NVIDIA driver to one for CUDA {version}, or use a {who} for "
               f"CUDA <= {f.driver.cuda_version}")
        if supported[0] < wanted[0]:
            found.append(Check("CUDA driver", "problem",
                               f"{detail}, older than {who}'s CUDA {version}", fix))
        else:
            found.append(Check("CUDA driver", "warning",
                               f"{detail}, older than {who}'s CUDA {version}: works through "
                               "minor-version compatibility unless PTX must be JIT-compiled", fix))
    found.sort(key=lambda c: c.status != "problem")
    yield found[0] if found else Check("CUDA driver", "ok", detail, None)


def check_cccl(f: Facts) -> Iterator[Check]:
    """Where thrust/cub live: include/ before CUDA 13, include/cccl from CUDA 13 on."""
    home = f.cuda_home
    if home is None or f.nvcc_version is None:
        return
    if toolchain.cccl_include() is not None:
        yield Check("CCCL headers", "ok",
                    "thrust/cub under include/cccl (CUDA 13 layout); opgen adds it to the include "
                    "path", None)
    elif (home / "include" / "thrust").is_dir():
        yield Check("CCCL headers", "ok", "thrust/cub in include/", None)
    else:
        yield Check("CCCL headers", "problem" if f.gpu_build else "warning",
                    f"thrust not found in {home}/include or {home}/include/cccl: Paddle's headers "
                    "include <thrust/complex.h>",
                    "install the toolkit's CCCL headers (the cuda-cccl package)")


def check_cxx(f: Facts) -> Iterator[Check]:
    """The C++ compiler: present, C++17-capable, and within nvcc's supported gcc range."""
    if shutil.which(f.cxx) is None:
        yield Check("g++", "problem", f"{f.cxx} not found: no op can be compiled",
                    "install g++ (apt install g++) or set CXX")
        return
    version = f.cxx_version
    major = (_version_tuple(version) or (0,))[0]
    if version is None:
        yield Check("g++", "warning", f"{f.cxx} does not report a gcc version", None)
        return
    if major < 7:
        yield Check("g++", "problem", f"{f.cxx} {version} cannot compile C++17",
                    "install g++ 7 or newer and put it first on PATH")
        return
    limit = nvcc_max_gcc(f.cuda_home) if f.cuda_home and f.nvcc_version else None
    if limit is None:
        yield Check("g++", "ok", version, None)
    elif major > limit:
        yield Check("g++", "problem" if f.gpu_build else "warning",
                    f"{version} is newer than nvcc {f.nvcc_version} accepts (gcc <= {limit}, "
                    "from crt/host_config.h)",
                    f"install g++-{limit} and put it first on PATH as g++, gcc and cc "
                    "(nvcc uses the host compiler on PATH)")
    else:
        yield Check("g++", "ok", f"{version} (nvcc {f.nvcc_version} accepts gcc <= {limit})", None)


def check_abi(f: Facts) -> Iterator[Check]:
    """The C++ ABI of Paddle against the compiler's default.

    Paddle's cpp_extension always compiles ops with ``-D_GLIBCXX_USE_CXX11_ABI=1``, so only a
    Paddle built with the old ABI breaks a build (the op then fails to load: undefined symbols).
    """
    if f.paddle is None or shutil.which(f.cxx) is None:
        return
    paddle_abi = f.paddle.cxx11_abi
    if paddle_abi is None and f.paddle_dir is not None:
        paddle_abi = library_uses_cxx11_abi(f.paddle_dir)
    compiler_abi = cxx_default_abi(f.cxx)

    cxx = {True: "the C++11 ABI", False: "the old ABI", None: "an unknown ABI"}[compiler_abi]
    if paddle_abi is None:
        yield Check("C++ ABI", "warning", f"could not tell Paddle's ABI; {f.cxx} defaults to {cxx}",
                    None)
    elif not paddle_abi:
        yield Check("C++ ABI", "problem",
                    "Paddle uses the old ABI but cpp_extension compiles ops with "
                    "_GLIBCXX_USE_CXX11_ABI=1: the op will not load",
                    "install an official Paddle wheel (C++11 ABI since Paddle 2.0)")
    elif compiler_abi is False:
        yield Check("C++ ABI", "ok", f"Paddle uses the C++11 ABI, {f.cxx} defaults to the old one;"
                    " cpp_extension passes -D_GLIBCXX_USE_CXX11_ABI=1", None)
    elif compiler_abi:
        yield Check("C++ ABI", "ok", f"Paddle and {f.cxx} both use the C++11 ABI", None)
    else:
        yield Check("C++ ABI", "ok", f"Paddle uses the C++11 ABI; {f.cxx} defaults to {cxx}, and "
                    "cpp_extension passes -D_GLIBCXX_USE_CXX11_ABI=1", None)


def check_tools(f: Facts) -> Iterator[Check]:
    """ninja and ccache: optional, so never worse than a warning."""
    ninja = shutil.which("ninja")
    if ninja:
        proc = _run([ninja, "--version"], timeout=10)
        version = proc.stdout.strip() if proc and proc.returncode == 0 else "?"
        yield Check("ninja", "ok", f"{version} ({ninja})", None)
    else:
        yield Check("ninja", "warning", "not found (optional: parallel compilation)",
                    "pip install ninja")
    ccache = shutil.which("ccache")
    if ccache:
        yield Check("ccache", "ok", ccache, None)
    else:
        yield Check("ccache", "warning",
                    "not found (optional: Paddle 3 caches compiler output with it)",
                    "apt install ccache")


CHECKS: tuple[Callable[[Facts], Iterator[Check]], ...] = (
    check_paddle, check_paddle_cuda, check_gpus, check_paddle_kernels, check_gpu_run,
    check_cuda_toolkit, check_driver, check_cccl, check_cxx, check_abi, check_tools,
)


def run_checks() -> list[Check]:
    """Probe this machine and return every check, in report order."""
    facts = Facts()
    return [check for run in CHECKS for check in run(facts)]


def exit_code(checks: Iterable[Check]) -> int:
    """1 when any check is a problem (a build would fail), else 0."""
    return 1 if any(c.status == "problem" for c in checks) else 0


_STYLE = {"ok": "green", "warning": "yellow", "problem": "bold red"}


def _summary(checks: list[Check]) -> dict[str, int]:
    counts = Counter(c.status for c in checks)
    return {status: counts.get(status, 0) for status in ("ok", "warning", "problem")}


def report(checks: Iterable[Check], *, as_json: bool, color: bool = False,
           width: int | None = None) -> str:
    """The checks as a table (fixes under their detail, then a summary line), or as JSON.

    ``color`` adds ANSI styles for a terminal; ``width`` defaults to the terminal's, at least 80.
    """
    checks = list(checks)
    summary = _summary(checks)
    if as_json:
        return json.dumps({"exit_code": exit_code(checks), "summary": summary,
                           "checks": [asdict(c) for c in checks]}, indent=2)
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, expand=False)
    table.add_column("check", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("detail", overflow="fold")
    for c in checks:
        cell = Text(c.detail)
        if c.fix:
            cell.append("\nfix: ", style="bold").append(c.fix, style="cyan")
        table.add_row(c.name, Text(c.status, style=_STYLE[c.status]), cell)
    width = width or max(80, shutil.get_terminal_size((100, 24)).columns)
    out = io.StringIO()
    console = Console(file=out, width=width, force_terminal=color, no_color=not color,
                      color_system="standard" if color else None, highlight=False)
    console.print(table)
    verdict = ("a build would fail: fix the problems above" if summary["problem"]
               else "builds should work")
    console.print(f"{summary['ok']} ok, {summary['warning']} warning(s), "
                  f"{summary['problem']} problem(s): {verdict}")
    return "\n".join(line.rstrip() for line in out.getvalue().splitlines()) + "\n"
