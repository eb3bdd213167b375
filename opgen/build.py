"""Building an op with ``paddle.utils.cpp_extension``: flags, a content-keyed cache, a lock, and
the first compiler error instead of the whole log.

The compile runs in a subprocess (its output is captured and parsed); the finished library is
then loaded into this process. Each distinct build lives in ``<op>/build/<key>/``, where the key
hashes every source, the flags, the Paddle and CUDA versions and the archs: an unchanged op loads
without compiling, and any change builds anew.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from filelock import FileLock

from . import __version__, toolchain
from .errors import BuildError, ToolchainError, UsageError

BUILD_DIR = "build"


@dataclass(frozen=True)
class BuildConfig:
    """Everything that decides what a build produces."""

    name: str                    # op name; the library module is <name>_lib
    op_dir: Path
    sources: tuple[Path, ...]
    cuda: bool
    arches: tuple[int, ...]
    cxx_flags: tuple[str, ...]
    cuda_flags: tuple[str, ...]
    include_dirs: tuple[Path, ...]
    env: dict[str, str] = field(default_factory=dict)

    @property
    def library(self) -> str:
        return f"{self.name}_lib"

    def key(self) -> str:
        digest = hashlib.sha256()
        csrc = self.op_dir / "csrc"
        for path in sorted(csrc.rglob("*")):
            if path.is_file():
                digest.update(path.relative_to(csrc).as_posix().encode() + b"\0")
                digest.update(path.read_bytes() + b"\0")
        info = toolchain.paddle_info()
        digest.update(json.dumps({
            "sources": [s.name for s in self.sources], "cuda": self.cuda, "arches": self.arches,
            "cxx": self.cxx_flags, "nvcc": self.cuda_flags, "opgen": __version__,
            "paddle": info.version if info else None,
            "cuda_version": toolchain.nvcc_version() if self.cuda else None,
        }, sort_keys=True).encode())
        return digest.hexdigest()[:16]

    def build_dir(self) -> Path:
        return self.op_dir / BUILD_DIR / self.key()


def find_op(op_dir: Path) -> str:
    """The op's name: the folder holds ``csrc/<name>.cc`` (and ``<name>.py``)."""
    csrc = op_dir / "csrc"
    candidates = sorted(p.stem for p in csrc.glob("*.cc")) if csrc.is_dir() else []
    if len(candidates) != 1:
        raise UsageError(f"{op_dir}: not a generated op folder (expected one csrc/<name>.cc; "
                         f"run `opgen generate` first)")
    return candidates[0]


def parse_arches(text: str | None) -> tuple[int, ...]:
    if not text:
        return ()
    try:
        arches = tuple(sorted({int(a.strip().replace("sm_", "")) for a in text.split(",")}))
    except ValueError:
        raise UsageError(f"--arch: expected compute capabilities like 80,90, got {text!r}") from None
    if any(a < 50 or a > 130 for a in arches):
        raise UsageError(f"--arch: {text!r} is not a CUDA compute capability (e.g. 80, 90)")
    return arches


def configure(op_dir: Path, *, cpu_only: bool = False, arches: tuple[int, ...] = ()) -> BuildConfig:
    """Decide sources, flags and archs for the installed Paddle and toolkit."""
    op_dir = Path(op_dir).resolve()
    if not op_dir.is_dir():
        raise UsageError(f"{op_dir}: no such op folder")
    name = find_op(op_dir)
    info = toolchain.paddle_info()
    if info is None:
        raise ToolchainError("Paddle is not installed in this Python "
                             f"({sys.executable}): pip install paddlepaddle")
    csrc = op_dir / "csrc"
    sources = [csrc / f"{name}.cc"]
    include_dirs = [csrc]
    env: dict[str, str] = {}
    cccl = toolchain.cccl_include()
    if cccl is not None:  # Paddle's headers include <thrust/...>, which CUDA 13 moved
        include_dirs.append(cccl)
        env["CPLUS_INCLUDE_PATH"] = os.pathsep.join(
            filter(None, [str(cccl), os.environ.get("CPLUS_INCLUDE_PATH", "")]))
    cu = csrc / f"{name}.cu"
    cuda = bool(info.with_cuda and not cpu_only and cu.exists())
    if cuda:
        home = toolchain.cuda_home()
        if home is None:
            raise ToolchainError("Paddle is compiled with CUDA but no CUDA toolkit was found: set "
                                 "CUDA_HOME, or build with --cpu-only")
        env["CUDA_HOME"] = str(home)
        sources.append(cu)
        arches = arches or toolchain.detect_arches() or (90,)
    else:
        arches = ()
    top = max(arches) if arches else 0
    # OPGEN_NVCC_FLAGS: extra nvcc flags (e.g. -DOPGEN_UNROLL=8 to tune the launcher); they are
    # part of the cache key like every other flag.
    extra_nvcc = os.environ.get("OPGEN_NVCC_FLAGS", "").split()
    cuda_flags = ["-O3", "-std=c++17"] + [
        f"-gencode=arch=compute_{a},code=" + (f"[sm_{a},compute_{a}]" if a == top else f"sm_{a}")
        for a in arches
    ] + extra_nvcc
    return BuildConfig(name=name, op_dir=op_dir, sources=tuple(sources), cuda=cuda,
                       arches=tuple(arches), cxx_flags=("-O3", "-std=c++17"),
                       cuda_flags=tuple(cuda_flags) if cuda else (),
                       include_dirs=tuple(include_dirs), env=env)


_COMPILE = """
import json, sys
from paddle.utils.cpp_extension import load
args = json.loads(sys.argv[1])
load(name=args["name"], sources=args["sources"], extra_cxx_cflags=args["cxx"],
     extra_cuda_cflags=args["nvcc"], extra_include_paths=args["include"],
     build_directory=args["build_dir"], verbose=True)
"""


def built_library(config: BuildConfig) -> Path | None:
    """The compiled library of ``config``, if it was built (Paddle 3 puts it one folder down)."""
    build_dir = config.build_dir()
    for folder in (build_dir, build_dir / config.library):
        library = folder / f"{config.library}.so"
        if library.exists():
            return library
    return None


def compile_library(config: BuildConfig, *, verbose: bool = False) -> Path:
    """Compile the op unless an identical build exists; return the library's path."""
    build_dir = config.build_dir()
    library = built_library(config)
    if library is not None:
        return library
    build_dir.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(build_dir.parent / f"{build_dir.name}.lock")):
        library = built_library(config)
        if library is not None:  # another process built it while we waited
            return library
        build_dir.mkdir(parents=True, exist_ok=True)
        args = {"name": config.library, "sources": [str(s) for s in config.sources],
                "cxx": list(config.cxx_flags), "nvcc": list(config.cuda_flags),
                "include": [str(p) for p in config.include_dirs], "build_dir": str(build_dir)}
        env = {**os.environ, **config.env, "GLOG_minloglevel": "2"}
        proc = subprocess.run([sys.executable, "-c", _COMPILE, json.dumps(args)],
                              capture_output=True, text=True, env=env, check=False,
                              cwd=build_dir)
        log = proc.stdout + proc.stderr
        (build_dir / "build.log").write_text(log)
        if verbose:
            sys.stderr.write(log)
        library = built_library(config)
        if proc.returncode != 0 or library is None:
            raise BuildError(first_error(log, config) + f"\n(full log: {build_dir / 'build.log'})")
    return library


_ERROR_PATTERNS = [
    re.compile(r"^(?P<file>[^\s:][^:]*?):(?P<line>\d+):(?:\d+:)?\s*(?:fatal )?error:\s*(?P<msg>.*)$"),
    re.compile(r"^(?P<file>[^\s(][^(]*?)\((?P<line>\d+)\):\s*error:\s*(?P<msg>.*)$"),  # nvcc
]


def first_error(log: str, config: BuildConfig) -> str:
    """The first compiler error of ``log`` as ``file:line: message`` plus the offending line."""
    for raw in log.splitlines():
        for pattern in _ERROR_PATTERNS:
            match = pattern.match(raw.strip())
            if not match:
                continue
            path = Path(match["file"])
            line = int(match["line"])
            shown = _relative(path, config.op_dir)
            text = f"{shown}:{line}: error: {match['msg'].strip()}"
            source = _source_line(path, line)
            if source:
                text += f"\n    {source.strip()}"
            return text
    tail = [x for x in log.splitlines() if x.strip()][-5:]
    return "build failed:\n" + "\n".join(tail)


def _relative(path: Path, root: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        try:
            return str(path.resolve().relative_to(root.parent))
        except ValueError:
            return str(path)


def _source_line(path: Path, line: int) -> str | None:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return None
    return lines[line - 1] if 0 < line <= len(lines) else None


_loaded: dict[Path, ModuleType] = {}


def load_library(op_dir: Path | str, *, cpu_only: bool = False, arches: tuple[int, ...] = (),
                 verbose: bool = False) -> ModuleType:
    """Build the op in ``op_dir`` if needed and load its library module (``<name>_lib``)."""
    config = configure(Path(op_dir), cpu_only=cpu_only, arches=arches)
    library = compile_library(config, verbose=verbose)
    if library in _loaded:
        return _loaded[library]
    from paddle.utils.cpp_extension.extension_utils import _import_module_from_library

    module = _import_module_from_library(config.library, str(library.parent), verbose)
    _loaded[library] = module
    return module
