"""Building an op with ``paddle.utils.cpp_extension``: flags, a content-keyed cache, a lock, and
the first compiler error instead of the whole log.

The compile runs in a subprocess (its output is captured and parsed); the finished library is
then loaded into this process. Each distinct build lives in ``<op>/build/<key>/``, where the key
hashes every source, the flags, the compilers, the Python ABI, the Paddle and CUDA versions and
the archs: an unchanged op loads without compiling, and any change builds anew.

A build counts as done only once its marker file is written, after the compiler succeeded; a
lock per key makes concurrent builds of one op (every rank of a distributed job, say) compile it
once while the others wait and then load the result.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import shutil
import socket
import subprocess
import sys
import sysconfig
import time
import warnings
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path, PurePosixPath
from types import ModuleType

from filelock import FileLock

from . import __version__, probe, toolchain
from .errors import BuildError, MergeError, OpgenError, ToolchainError, UsageError

BUILD_DIR = "build"
MARKER = "opgen-build.json"  # written last: a build folder without it is unfinished


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
        """The build's cache key: a hash of everything that can change the compiled library."""
        return self._key

    @cached_property
    def _key(self) -> str:
        digest = hashlib.sha256()
        csrc = self.op_dir / "csrc"
        for path in sorted(csrc.rglob("*")):
            if path.is_file():
                digest.update(path.relative_to(csrc).as_posix().encode() + b"\0")
                digest.update(path.read_bytes() + b"\0")
        info = probe.paddle_info()
        digest.update(json.dumps({
            "sources": [s.name for s in self.sources], "cuda": self.cuda, "arches": self.arches,
            "cxx": self.cxx_flags, "nvcc": self.cuda_flags, "opgen": __version__,
            "include": [str(p) for p in self.include_dirs], "env": sorted(self.env.items()),
            "python": [sys.implementation.cache_tag, sysconfig.get_platform()],
            "compilers": _compiler_stamps(),
            "paddle": info.version if info else None,
            "cuda_version": toolchain.nvcc_version() if self.cuda else None,
        }, sort_keys=True).encode())
        return digest.hexdigest()[:16]

    def build_dir(self) -> Path:
        return self.op_dir / BUILD_DIR / self.key()

    def describe(self) -> str:
        """What the build targets, for messages: 'CPU' or 'CPU + CUDA sm_80,sm_90'."""
        if not self.cuda:
            return "CPU"
        return "CPU + CUDA " + ",".join(f"sm_{a}" for a in self.arches)


def _compiler_stamps() -> list[list[object]]:
    """The C and C++ compilers setuptools will call, as (path, size, mtime): an upgraded g++
    builds anew. Stat calls only: running ``g++ --version`` would cost every cached build."""
    stamps: list[list[object]] = []
    for var in ("CC", "CXX"):
        command = os.environ.get(var) or sysconfig.get_config_var(var) or ""
        found = shutil.which(command.split()[0]) if command.split() else None
        if found is None:
            stamps.append([var, command])
            continue
        real = Path(found).resolve()
        stat = real.stat()
        stamps.append([var, str(real), stat.st_size, stat.st_mtime_ns])
    return stamps


def find_op(op_dir: Path) -> str:
    """The op's name: the folder holds ``csrc/<name>.cc`` (and ``<name>.py``); where csrc/
    holds other .cc files too (a helper source, one left by a renamed op), the one its answers
    file records with its wrapper beside it."""
    csrc = op_dir / "csrc"
    candidates = sorted(p.stem for p in csrc.glob("*.cc")) if csrc.is_dir() else []
    if len(candidates) > 1:
        recorded = set(recorded_files(op_dir))
        ours = [c for c in candidates if f"csrc/{c}.cc" in recorded and f"{c}.py" in recorded
                and (op_dir / f"{c}.py").is_file()]
        if len(ours) == 1:
            return ours[0]
        why = ("its answers file names none of them, with its wrapper beside it, as the op's"
               if recorded else f"no {ANSWERS_FILE} there says which is the op's")
        raise UsageError(f"{op_dir}: csrc/ holds {', '.join(c + '.cc' for c in candidates)}, "
                         f"and {why}; run `opgen generate` on the op's spec")
    if not candidates:
        raise UsageError(f"{op_dir}: not a generated op folder (expected one csrc/<name>.cc; "
                         f"run `opgen generate` first)")
    return candidates[0]


def op_folder(op_dir: Path | str) -> tuple[Path, str]:
    """``op_dir`` resolved and the op's name, once it is a generated op's folder with no merge
    conflict marker left in it (:func:`refuse_unresolved`); else the error, naming the folder as
    the caller gave it. Every build, load, test and bench of an op starts here."""
    given = Path(op_dir)
    if given.is_file():  # the spec, most likely
        raise UsageError(f"{given}: a file; name the op's folder ({given.parent})")
    if not given.is_dir():
        raise UsageError(f"{given}: no such op folder")
    folder, name = given.resolve(), find_op(given)
    refuse_unresolved(folder, name)
    return folder, name


#: The answers file an op folder records its generated files in (``opgen.writer.ANSWERS_FILE``,
#: named here: importing opgen.writer would import yaml and the templates on every load).
ANSWERS_FILE = ".opgen-answers.yml"
#: One generated file in the answers file's ``files:`` mapping, as ``yaml.safe_dump`` writes
#: most: two spaces, the path (plain, or quoted where YAML needs it), a colon, its SHA-256.
_RECORDED = re.compile(r"  (?P<path>[^\s?].*?): [0-9a-f]{64}")


def recorded_files(op_dir: Path) -> list[str]:
    """The paths (relative, POSIX) of the files the last ``opgen generate`` wrote into
    ``op_dir``, from its answers file: [] when there is none that reads; paths that would lie
    outside the folder are left out. Read line by line without yaml, which a wrapper loading its
    library must not import (docs/benchmarks.md "Start-up"); yaml reads only a record past that
    (a path YAML escapes or writes as a complex key)."""
    try:
        text = (op_dir / ANSWERS_FILE).read_text()
    except (OSError, UnicodeDecodeError):
        return []
    paths = _plain_record(text.splitlines())
    if paths is None:
        paths = _yaml_record(text)
    inside = []
    for path in paths:
        parts = PurePosixPath(path).parts
        if parts and parts[0] != "/" and ".." not in parts:
            inside.append(path)
    return inside


def _plain_record(lines: list[str]) -> list[str] | None:
    """The paths of the ``files:`` mapping as yaml.safe_dump writes them, or None at any line
    read otherwise than yaml would."""
    try:
        start = lines.index("files:") + 1
    except ValueError:
        return None
    paths = []
    for line in lines[start:]:
        if not line.startswith(" "):
            break  # the next top-level key: the mapping ended
        found = _RECORDED.fullmatch(line)
        if found is None:
            return None
        path = found["path"]
        if path[0] == "'":
            if len(path) < 2 or path[-1] != "'" or "'" in path[1:-1].replace("''", ""):
                return None
            path = path[1:-1].replace("''", "'")
        elif path[0] == '"':
            try:
                path = json.loads(path)  # YAML's escapes that JSON shares: \\ \" \t \uXXXX
            except ValueError:
                return None
        elif path[0] in "!&*|>%@`#,[]{}-:" or ": " in path or " #" in path:
            return None  # not YAML's plain form: left to yaml
        paths.append(path)
    return paths


def _yaml_record(text: str) -> list[str]:
    import yaml

    try:
        files = yaml.safe_load(text)["files"]
    except (yaml.YAMLError, TypeError, KeyError, RecursionError):
        return []
    return [path for path in files if isinstance(path, str)] if isinstance(files, dict) else []


def generated_files(op_dir: Path, name: str) -> list[Path]:
    """Every file opgen generated for the op ``name`` in ``op_dir``, as its answers file records
    them, and whatever else the op is built and loaded from (csrc/, the wrapper and its tests),
    recorded or not (an op from before the record, a damaged one, a source the user added):
    sorted by path, each once."""
    files = {op_dir / rel for rel in recorded_files(op_dir)}
    csrc = op_dir / "csrc"
    if csrc.is_dir():
        files.update(p for p in csrc.rglob("*") if p.is_file())
    files.update((op_dir / f"{name}.py", op_dir / f"test_{name}.py"))
    return sorted(files)


def refuse_unresolved(op_dir: Path, name: str) -> None:
    """Raise :class:`MergeError` for the first merge conflict marker left in any file generated
    for the op (:func:`generated_files`): a half-merged op is never compiled, imported, tested or
    timed. A scan of the files' text, on every build and load."""
    refuse_conflicts(op_dir, generated_files(op_dir, name))


def refuse_conflicts(op_dir: Path, files: list[Path]) -> None:
    """Raise :class:`MergeError` naming the first line of ``files`` that is a merge conflict
    marker, so a half-merged source never reaches the compiler (or pytest)."""
    from .markers import conflict_marker_line

    for path in files:
        try:
            line = conflict_marker_line(path.read_bytes())
        except OSError:
            continue  # missing or unreadable: the compiler says so in its own words
        if line is not None:
            raise MergeError(f"{_relative(path, op_dir)}:{line}: unresolved merge conflict "
                             "(keep the lines you want, delete the <<<<<<< ======= >>>>>>> "
                             "markers, then build again)")


def parse_arches(text: str | None) -> tuple[int, ...]:
    """``--arch``'s compute capabilities, sorted, each once; () for None (the local GPUs')."""
    if text is None:
        return ()
    if not text.strip():
        raise UsageError("--arch: empty; give compute capabilities like 80,90, or leave it out "
                         "for the local GPUs'")
    try:
        arches = tuple(sorted({int(a.strip().replace("sm_", "")) for a in text.split(",")}))
    except ValueError:
        raise UsageError(f"--arch: expected compute capabilities like 80,90, "
                         f"got {text!r}") from None
    if any(a < 50 or a > 130 for a in arches):
        raise UsageError(f"--arch: {text!r} is not a CUDA compute capability (e.g. 80, 90)")
    return arches


#: The C++ compiler's flags for the CPU kernels (docs/building.md, "CPU flags"): portable ones
#: only, no -march, so a built op runs on any x86-64 (or aarch64) machine; the CPU loop is cloned
#: for AVX2 and AVX-512 inside the library instead (opgen/broadcast.h). -fno-trapping-math and
#: -fno-math-errno change no result: they let the compiler evaluate both sides of a select
#: (``where``, min, max, the fast tanh) and vectorize the loop instead of branching per element.
#: -ffp-contract=off keeps a * b + c two roundings in every clone, so all compute the same bits.
#: -fno-tree-loop-distribute-patterns keeps a loop that copies into a small buffer a loop (the
#: row-wise reductions' 32 values at a time) rather than a call to memcpy.
CXX_FLAGS = ("-O3", "-std=c++17", "-fno-trapping-math", "-fno-math-errno", "-ffp-contract=off",
             "-fno-tree-loop-distribute-patterns")


def configure(op_dir: Path, *, cpu_only: bool = False, arches: tuple[int, ...] = ()) -> BuildConfig:
    """Decide sources, flags and archs for the installed Paddle and toolkit (once no file
    generated for the op holds a merge conflict marker: :func:`op_folder`)."""
    op_dir, name = op_folder(op_dir)
    info = probe.paddle_info()
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
        misdirected = toolchain.misdirected_cuda_variable()
        if misdirected is not None:
            var, value = misdirected
            raise ToolchainError(f"{var}={value} has no bin/nvcc: point it at a CUDA toolkit, "
                                 "unset it, or build with --cpu-only")
        home = toolchain.cuda_home()
        if home is None:
            raise ToolchainError("Paddle is compiled with CUDA but no CUDA toolkit was found: set "
                                 "CUDA_HOME, or build with --cpu-only")
        env["CUDA_HOME"] = str(home)
        sources.append(cu)
        arches = arches or toolchain.detect_arches() or (90,)
    else:
        arches = ()
    for source in sources:
        _check_source(source, op_dir)
    top = max(arches) if arches else 0
    # OPGEN_NVCC_FLAGS: extra nvcc flags (e.g. -DOPGEN_UNROLL=8 to tune the launcher); they are
    # part of the cache key like every other flag.
    extra_nvcc = os.environ.get("OPGEN_NVCC_FLAGS", "").split()
    cuda_flags = ["-O3", "-std=c++17"] + [
        f"-gencode=arch=compute_{a},code=" + (f"[sm_{a},compute_{a}]" if a == top else f"sm_{a}")
        for a in arches
    ] + extra_nvcc
    return BuildConfig(name=name, op_dir=op_dir, sources=tuple(sources), cuda=cuda,
                       arches=tuple(arches), cxx_flags=CXX_FLAGS,
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


@dataclass(frozen=True)
class Built:
    """The outcome of :func:`ensure_built`."""

    library: Path
    compiled: bool      # this process ran the compiler
    seconds: float      # compiling, or waiting for another process that compiled it
    waited: bool        # another process held the build's lock; its result was used


def built_library(config: BuildConfig) -> Path | None:
    """The compiled library of ``config`` if its build finished, else None."""
    build_dir = config.build_dir()
    if not (build_dir / MARKER).is_file():
        return None
    for folder in (build_dir, build_dir / config.library):  # Paddle 3 puts it one folder down
        library = folder / f"{config.library}.so"
        if library.exists():
            return library
    return None


#: Builds that failed in this process, by build folder (the key covers every source): every
#: call of a generated wrapper builds on first use, so without this a test run would compile a
#: broken op once per test.
_failed: dict[Path, str] = {}


def ensure_built(config: BuildConfig, *, verbose: bool = False) -> Built:
    """Compile the op unless an identical build exists; at most one process compiles a key.

    A failed build is not retried by this process: later calls with the same sources raise the
    same :class:`BuildError` at once."""
    library = built_library(config)
    if library is not None:
        return Built(library, compiled=False, seconds=0.0, waited=False)
    build_dir = config.build_dir()
    if build_dir in _failed:
        raise BuildError(_failed[build_dir] + "\n  (this build failed earlier in this process; "
                         "it is retried once csrc/ changes)")
    try:
        return _build_locked(config, build_dir, verbose=verbose)
    except BuildError as exc:
        _failed[build_dir] = str(exc)
        raise


def _build_locked(config: BuildConfig, build_dir: Path, *, verbose: bool) -> Built:
    """Compile ``config`` under its build's lock, unless another process did meanwhile."""
    start = time.perf_counter()
    try:
        build_dir.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(build_dir.parent / f"{build_dir.name}.lock"))
        with lock:
            library = built_library(config)
            if library is not None:  # another process built it while we waited
                return Built(library, compiled=False, seconds=time.perf_counter() - start,
                             waited=True)
            library = _compile(config, verbose=verbose)
    except OSError as exc:
        raise BuildError(f"cannot build in {build_dir.parent}: {exc.strerror or exc}") from None
    return Built(library, compiled=True, seconds=time.perf_counter() - start, waited=False)


def compile_library(config: BuildConfig, *, verbose: bool = False) -> Path:
    """Compile the op unless an identical build exists; return the library's path."""
    return ensure_built(config, verbose=verbose).library


def compile_libraries(configs: Sequence[BuildConfig]) -> None:
    """Compile several ops at once, each in a compiler process of its own (the GPU machine builds
    an op in about 75-140 s, mostly one compiler process at a time). Waits for every build, then
    raises the first one's error, if any."""
    with ThreadPoolExecutor(max_workers=max(1, len(configs))) as pool:
        futures = [pool.submit(compile_library, config) for config in configs]
    for future in futures:
        future.result()


def _refuse_what_cannot_build(config: BuildConfig, build_dir: Path) -> None:
    """Causes of a failed build that Paddle's builder reports as a traceback of its own, named
    before it runs: a compiler that is not there, and a path with whitespace (Paddle's
    cpp_extension runs ``cd <build folder> && ...`` through a shell, unquoted)."""
    if any(c.isspace() for c in str(build_dir)):
        raise BuildError(f"{config.op_dir}: the op's path has whitespace in it, which Paddle's "
                         "builder (paddle.utils.cpp_extension) cannot take: move the op to a "
                         "path without spaces")
    for var in ("CC", "CXX"):
        given = os.environ.get(var)
        command = given or sysconfig.get_config_var(var) or ""
        program = command.split()[0] if command.split() else ""
        if program and shutil.which(program) is None:
            where = f"${var}" if given else "Python's build configuration"
            raise BuildError(f"the {'C' if var == 'CC' else 'C++'} compiler {program} (from "
                             f"{where}) was not found: install it (g++), or set {var} to one")


def _compile(config: BuildConfig, *, verbose: bool) -> Path:
    """Run the compiler for ``config`` (the caller holds the lock) and mark the build done."""
    build_dir = config.build_dir()
    _refuse_what_cannot_build(config, build_dir)
    if build_dir.exists():  # an interrupted or failed build: start clean
        shutil.rmtree(build_dir)
    build_dir.mkdir(parents=True)
    args = {"name": config.library, "sources": [str(s) for s in config.sources],
            "cxx": list(config.cxx_flags), "nvcc": list(config.cuda_flags),
            "include": [str(p) for p in config.include_dirs], "build_dir": str(build_dir)}
    # LC_ALL=C: untranslated compiler messages with ASCII quotes, which first_error can parse.
    env = {**os.environ, **config.env, "GLOG_minloglevel": "2", "LC_ALL": "C"}
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", _COMPILE, json.dumps(args)],
                          capture_output=True, text=True, env=env, check=False, cwd=build_dir,
                          errors="replace")
    seconds = time.perf_counter() - start
    log = proc.stdout + proc.stderr
    (build_dir / "build.log").write_text(log)
    if verbose:
        sys.stderr.write(log)
    library = next((p for p in (build_dir / f"{config.library}.so",
                                build_dir / config.library / f"{config.library}.so")
                    if p.exists()), None)
    if proc.returncode != 0 or library is None:
        raise BuildError(first_error(log, config) +
                         f"\n  full log: {_relative(build_dir / 'build.log', config.op_dir)}")
    marker = {
        "key": config.key(), "op": config.name,
        "library": library.relative_to(build_dir).as_posix(),
        "target": config.describe(), "cxx_flags": config.cxx_flags,
        "cuda_flags": config.cuda_flags, "seconds": round(seconds, 2), "pid": os.getpid(),
        "host": socket.gethostname(), "opgen": __version__,
    }
    tmp = build_dir / f"{MARKER}.tmp"
    tmp.write_text(json.dumps(marker, indent=2) + "\n")
    tmp.replace(build_dir / MARKER)
    return library


# -- the first compiler error ---------------------------------------------------------------------

_ERROR_PATTERNS = [
    # g++: file:line:col: error: message (also "fatal error:")
    re.compile(r"^(?P<file>[^\s:][^:]*?):(?P<line>\d+):(?:(?P<col>\d+):)?\s*(?:fatal )?error:"
               r"\s*(?P<msg>.*)$"),
    # nvcc (cudafe++): file(line): error: message
    re.compile(r"^(?P<file>[^\s(][^(]*?)\((?P<line>\d+)\):\s*error:\s*(?P<msg>.*)$"),
]
# Where g++ says a template was instantiated ("file:line:col:   required from here"), and where
# nvcc says the same after the error ("detected during ... at line N of file").
_CONTEXT_PATTERNS = [
    re.compile(r"^(?P<file>[^\s:][^:]*?):(?P<line>\d+):(?:\d+:)?\s+required from"),
    re.compile(r"at line (?P<line>\d+) of (?P<file>\S+)"),
]
_LINK_ERROR = re.compile(r"undefined reference to|undefined symbol|cannot find -l")
# The last line of a Python traceback, e.g. Paddle refusing to load or register the library...
_PYTHON_ERROR = re.compile(
    r"^(?:[A-Za-z_][\w.]*\.)?([A-Za-z_]\w*(?:Error|Exception|NotMet)): (.+)$")
# ... but not the build tools' own summaries of a failed compile, which say less than the log.
_BUILD_WRAPPER_ERROR = re.compile(r"CalledProcessError|[Ee]rror building extension|"
                                  r"returned non-zero exit status|error: command")


def first_error(log: str, config: BuildConfig) -> str:
    """The first compiler error of ``log``: ``file:line: message``, the offending line, and, when
    it sits in a functor generated from the spec, the spec's file, line and expression."""
    lines = log.splitlines()
    for i, raw in enumerate(lines):
        for pattern in _ERROR_PATTERNS:
            match = pattern.match(raw.strip())
            if match:
                return _error_message(match, lines, i, config)
        if _LINK_ERROR.search(raw):
            return "link error: " + raw.strip()
    for raw in reversed(lines):
        match = _PYTHON_ERROR.match(raw.strip())
        if match and not _BUILD_WRAPPER_ERROR.search(raw):
            return f"{match[1]}: {match[2].strip()}"
    tail = [x for x in lines if x.strip()][-5:]
    return "build failed:\n" + "\n".join(tail)


def _error_message(match: re.Match[str], lines: list[str], index: int,
                   config: BuildConfig) -> str:
    path = Path(match["file"])
    line = int(match["line"])
    col = int(match["col"]) if match.groupdict().get("col") else None
    where = f"{_relative(path, config.op_dir)}:{line}" + (f":{col}" if col else "")
    text = f"{where}: {match['msg'].strip()}"
    source = _source_line(path, line)
    if source is not None and source.strip():
        indent = len(source) - len(source.lstrip())
        text += f"\n    {source.strip()}"
        if col is not None and indent < col <= len(source) + 1:  # +1: at the line's end
            text += "\n    " + " " * (col - 1 - indent) + "^"
    origin = _spec_origin(path, line, config) or _instantiated_from(lines, index, config)
    if origin:
        text += f"\n  from the spec: {origin}"
    return text


def _instantiated_from(lines: list[str], index: int, config: BuildConfig) -> str | None:
    """The spec origin of an error inside opgen's launcher or Paddle's headers that a functor
    line instantiated: g++ names that line before the error, nvcc after it."""
    for context in lines[max(0, index - 30):index] + lines[index + 1:index + 6]:
        for pattern in _CONTEXT_PATTERNS:
            found = pattern.search(context.strip())
            origin = found and _spec_origin(Path(found["file"]), int(found["line"]), config)
            if origin:
                return origin
    return None


_FUNCTOR = re.compile(r"^struct (?P<struct>\w+) \{")
_ASSIGNMENT = re.compile(r"^\s+(?P<target>\w+) = .*;\s*$")
_SECTIONS = {"Forward": "forward", "Backward": "backward"}


def functor_line(header: Path, line: int) -> tuple[str, str] | None:
    """(functor struct, assigned name) when ``line`` of the generated header is one of the
    functor lines ``target = <expression>;`` inside ``operator()``; else None."""
    try:
        text = header.read_text(errors="replace").splitlines()
    except OSError:
        return None
    struct, in_call = None, False
    for number, row in enumerate(text, start=1):
        match = _FUNCTOR.match(row)
        if match:
            struct, in_call = match["struct"], False
        elif row.startswith("};"):
            struct, in_call = None, False
        elif struct and "operator()(" in row:
            in_call = True
        elif in_call and row.strip() == "}":
            in_call = False
        elif number == line and in_call and struct:
            assignment = _ASSIGNMENT.match(row)
            return (struct, assignment["target"]) if assignment else None
        if number >= line:
            return None
    return None


def _spec_origin(path: Path, line: int, config: BuildConfig) -> str | None:
    """``spec.yaml:LINE: forward.out: <expression>`` for a functor line of csrc/<name>.h."""
    header = config.op_dir / "csrc" / f"{config.name}.h"
    try:
        if not path.exists() or not header.exists() or not path.samefile(header):
            return None
    except OSError:
        return None
    found = functor_line(header, line)
    if found is None or found[0] not in _SECTIONS:
        return None
    section = _SECTIONS[found[0]]
    target = found[1]
    key = target[len("grad_"):] if section == "backward" and target.startswith("grad_") else target
    from .writer import recorded_answers

    answers = recorded_answers(config.op_dir)
    spec_path = config.op_dir / str(answers.get("spec") or f"{config.name}.yaml")
    try:
        from . import kinds  # noqa: F401  (registers each kind's spec rules)
        from .spec import load

        spec = load(spec_path, check_builtins=False)
    except OpgenError:
        spec = None
    expressions = getattr(spec.model, section, None) if spec else None
    if spec is None or not expressions or key not in expressions:
        origin = f"{spec_path.name}: {section}.{key}"
    else:
        origin = f"{_relative(spec_path, config.op_dir)}:{spec.line(section, key)}: " \
                 f"{section}.{key}: {' '.join(str(expressions[key]).split())}"
    files = answers.get("files")
    recorded = files.get(f"csrc/{header.name}") if isinstance(files, dict) else None
    if recorded and hashlib.sha256(header.read_bytes()).hexdigest() != recorded:
        origin += f" (csrc/{header.name} was edited after `opgen generate`)"
    return origin


def _check_source(source: Path, op_dir: Path) -> None:
    """Raise :class:`BuildError` naming a source the compile would fail on without naming it: not
    a readable file (a folder, a loop of links), or not UTF-8 text (Paddle's loader reads it)."""
    try:
        source.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BuildError(f"{_relative(source, op_dir)}: not UTF-8 text (byte {exc.start}); "
                         "fix it, or run `opgen generate` to write it again") from None
    except OSError as exc:
        reason = "a folder" if source.is_dir() else (exc.strerror or str(exc)).lower()
        raise BuildError(f"{_relative(source, op_dir)}: {reason}, not a source file; run "
                         "`opgen generate` to write it again") from None


def _relative(path: Path, root: Path) -> str:
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError):  # a loop of links (RuntimeError before Python 3.13)
        resolved = path.parent.resolve() / path.name
    try:
        return str(resolved.relative_to(Path.cwd()))
    except ValueError:
        try:
            return str(resolved.relative_to(root.parent))
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
    return load_configured(configure(Path(op_dir), cpu_only=cpu_only, arches=arches),
                           verbose=verbose)


def load_configured(config: BuildConfig, *, verbose: bool = False) -> ModuleType:
    """:func:`load_library` of a build already configured."""
    library = compile_library(config, verbose=verbose)
    if library in _loaded:
        return _loaded[library]
    with _quiet_paddle(verbose):
        from paddle.utils.cpp_extension.extension_utils import _import_module_from_library

        module = _import_module_from_library(config.library, str(library.parent), verbose)
    _loaded[library] = module
    return module


@contextlib.contextmanager
def _quiet_paddle(verbose: bool) -> Iterator[None]:
    """Keeps Paddle's loader quiet unless ``verbose``: its "No ccache found" warning (about
    compiling, which happened in a subprocess) and its INFO lines ("using custom operator
    only"), which would otherwise land amid a caller's output, such as ``opgen bench``'s table."""
    if verbose:
        yield
        return
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="No ccache found")
        # Imported before the level is set: importing it sets its logger's level to INFO, which
        # would undo ours when this load is the process's first use of cpp_extension.
        import paddle.utils.cpp_extension.extension_utils  # noqa: F401

        logger = logging.getLogger("utils.cpp_extension")
        level = logger.level
        logger.setLevel(logging.WARNING)
        try:
            yield
        finally:
            logger.setLevel(level)
