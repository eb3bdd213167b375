"""Packaging a compiled op as a wheel that installs and runs without its sources or opgen.

The wheel holds what Paddle's own ``setup()`` would install, built with opgen's flags:

- ``<name>_lib_pd_.so``: the compiled op library (for CUDA builds, a cubin per requested arch
  and PTX for the highest);
- ``<name>_lib.py``: Paddle's loader stub for it (written by Paddle's ``custom_write_stub``, so
  the op's Python API matches the Paddle it was built with), behind a check of that version;
- ``<name>.py``: the op's generated wrapper (keyword arguments, defaults), which imports
  ``<name>_lib`` when it is installed without its sources (no ``csrc/`` beside it).

The wheel is tied to the Paddle release and the CPython version it was built with, as every
custom-op library is: its metadata requires exactly that Paddle, and its tag names that CPython.
The library's run path is rewritten from the build machine's virtualenv to ``$ORIGIN/paddle/...``
(where Paddle sits once both are installed); a CUDA build still needs the CUDA runtime it was
linked against (libcudart.so.13 for nvcc 13), which :meth:`Wheel.summary` names.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from . import __version__, elf, probe
from .build import BuildConfig
from .errors import BuildError, UsageError

# Libraries every Linux Python process has, or that Paddle's wheel brings: a shipped op needs
# nothing more from the target machine unless its library names something else (libcudart).
_PROVIDED = re.compile(r"^(libpaddle|libstdc\+\+|libgcc_s|libc|libm|libdl|libpthread|librt|"
                       r"ld-linux[-\w]*)\.so")


@dataclass(frozen=True)
class Wheel:
    """A built wheel: its path, its files, and what its library holds and needs."""

    path: Path
    files: list[str]
    requires: str                 # e.g. paddlepaddle==3.3.1
    sass: tuple[int, ...]         # arches with a cubin (sm_XX as XX)
    ptx: tuple[int, ...]          # arches with PTX (compute_XX as XX)
    system_libraries: tuple[str, ...]  # what the target must provide besides Paddle, e.g. libcudart

    def summary(self) -> str:
        """E.g. 'sm_80, sm_90 cubins + compute_90 PTX; needs paddlepaddle-gpu==2.6.2,
        libcudart.so.13'."""
        if not self.sass and not self.ptx:
            code = "CPU only"
        else:
            code = ", ".join(f"sm_{a}" for a in self.sass) + " cubins"
            if self.ptx:
                code += " + " + ", ".join(f"compute_{a}" for a in self.ptx) + " PTX"
        return f"{code}; needs " + ", ".join([self.requires, *self.system_libraries])


_STUB = """
import json, sys
from paddle.utils.cpp_extension import extension_utils as eu
args = json.loads(sys.argv[1])
eu.CustomOpInfo.instance().add(args["name"], so_name=args["resource"], so_path=args["library"])
eu.custom_write_stub(args["resource"], args["stub"])
"""

_GUARD = '''"""{library}: the compiled Paddle custom op {name}, built by opgen {opgen} ({target}).

The library is tied to the C++ ABI of the Paddle it was built with: {requires}.
The rest of this file is Paddle's own loader stub (paddle.utils.cpp_extension).
"""

import paddle as _paddle

if _paddle.__version__ != {paddle!r}:
    raise RuntimeError(
        "{library} was built for Paddle {paddle}, but Paddle " + _paddle.__version__
        + " is installed: install {requires}, or rebuild the op with `opgen build --wheel`"
    )

'''


def build_wheel(config: BuildConfig, library: Path, dest: Path | str, *,
                version: str | None = None) -> Wheel:
    """Package ``library`` (the compiled build of ``config``) as a wheel in ``dest``."""
    info = probe.paddle_info()
    if info is None:
        raise BuildError("Paddle is needed to write the wheel's loader stub")
    check_version(version)
    version = version or f"0.1.0+{config.key()}"
    wrapper = config.op_dir / f"{config.name}.py"
    if not wrapper.is_file():
        raise UsageError(f"{config.op_dir}: no {config.name}.py wrapper; run `opgen generate`")
    distribution = _paddle_distribution()
    requires = f"{distribution}=={importlib.metadata.version(distribution)}"
    sass, ptx = device_code(library)
    missing = [a for a in config.arches if a not in sass]
    if missing or (config.arches and max(config.arches) not in ptx):
        raise BuildError(f"{library}: expected sm_{config.arches} cubins and compute_"
                         f"{max(config.arches)} PTX, found cubins {sorted(sass)} and PTX "
                         f"{sorted(ptx)}")
    lib = config.library
    with tempfile.TemporaryDirectory(prefix="opgen-wheel-") as tmp:
        stub = Path(tmp) / f"{lib}.py"
        _write_stub(config, library, stub)
        guard = _GUARD.format(library=lib, name=config.name, opgen=__version__,
                              target=config.describe(), requires=requires, paddle=info.version)
        binary = bytearray(library.read_bytes())
        old_runpath = runpath(binary)
        if old_runpath is not None:
            set_runpath(binary, shipped_runpath(old_runpath))
        files: dict[str, bytes] = {
            f"{config.name}.py": wrapper.read_bytes(),
            f"{lib}.py": guard.encode() + stub.read_bytes(),
            f"{lib}_pd_.so": bytes(binary),
        }
    dist = re.sub(r"[-_.]+", "_", lib)
    tag = wheel_tag()
    dist_info = f"{dist}-{version}.dist-info"
    files[f"{dist_info}/METADATA"] = _metadata(lib, version, config, requires).encode()
    files[f"{dist_info}/WHEEL"] = (
        f"Wheel-Version: 1.0\nGenerator: opgen {__version__}\nRoot-Is-Purelib: false\n"
        f"Tag: {tag}\n").encode()
    files[f"{dist_info}/top_level.txt"] = f"{config.name}\n{lib}\n".encode()
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / f"{dist}-{version}-{tag}.whl"
    _write_zip(path, files, f"{dist_info}/RECORD")
    system = tuple(n for n in needed(binary) if not _PROVIDED.match(n))
    return Wheel(path=path, files=[*files, f"{dist_info}/RECORD"], requires=requires,
                 sass=tuple(sorted(sass)), ptx=tuple(sorted(ptx)), system_libraries=system)


def check_version(version: str | None) -> None:
    """Raise :class:`UsageError` unless ``version`` is None or a plain PEP 440 version."""
    if version is not None and not re.fullmatch(
            r"\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?(\+[a-z0-9]+(\.[a-z0-9]+)*)?",
            version):
        raise UsageError(f"--wheel-version: {version!r} is not a version like 1.0.0, 1.0.0rc1 "
                         "or 1.0.0+local")


def _write_stub(config: BuildConfig, library: Path, stub: Path) -> None:
    """Paddle's own loader stub for ``library``, written by Paddle in a subprocess."""
    args = {"name": config.library, "resource": f"{config.library}.so",
            "library": str(library), "stub": str(stub)}
    env = {**os.environ, **config.env, "GLOG_minloglevel": "3"}
    proc = subprocess.run([sys.executable, "-c", _STUB, json.dumps(args)], capture_output=True,
                          text=True, env=env, check=False, errors="replace")
    if proc.returncode != 0 or not stub.is_file():
        tail = [x for x in (proc.stdout + proc.stderr).splitlines() if x.strip()][-3:]
        raise BuildError("Paddle could not load the op library to write its loader stub:\n"
                         + "\n".join(tail))


def _paddle_distribution() -> str:
    for name in ("paddlepaddle-gpu", "paddlepaddle"):
        try:
            importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        return name
    raise BuildError("cannot tell which Paddle distribution is installed "
                     "(neither paddlepaddle nor paddlepaddle-gpu)")


def wheel_tag() -> str:
    """This interpreter's tag, e.g. cp311-cp311-linux_x86_64: the library is built for it."""
    python = f"cp{sys.version_info.major}{sys.version_info.minor}"
    platform = re.sub(r"[-.]", "_", sysconfig.get_platform())
    return f"{python}-{python}-{platform}"


def _metadata(lib: str, version: str, config: BuildConfig, requires: str) -> str:
    summary = f"The Paddle custom op {config.name} ({config.describe()}), built by opgen"
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    return (f"Metadata-Version: 2.1\nName: {lib}\nVersion: {version}\nSummary: {summary}\n"
            f"Requires-Python: =={python}.*\nRequires-Dist: {requires}\n")


def _write_zip(path: Path, files: dict[str, bytes], record_name: str) -> None:
    """Write the wheel archive with its RECORD, atomically (a reader never sees half a wheel)."""
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append(f"{record_name},,")
    files = {**files, record_name: ("\n".join(record) + "\n").encode()}
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            entry = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            entry.compress_type = zipfile.ZIP_DEFLATED
            entry.external_attr = (0o755 if name.endswith(".so") else 0o644) << 16
            archive.writestr(entry, data)
    shutil.move(tmp, path)


def device_code(library: Path) -> tuple[set[int], set[int]]:
    """The arches ``library`` holds cubins for, and those it holds PTX for (empty for CPU)."""
    sass: set[int] = set()
    ptx: set[int] = set()
    for module_sass, module_ptx in elf.fatbin_modules(library):
        sass |= module_sass
        ptx |= module_ptx
    return sass, ptx


_PT_LOAD, _PT_DYNAMIC = 1, 2
_DT_NULL, _DT_NEEDED, _DT_STRTAB, _DT_SONAME, _DT_RPATH, _DT_RUNPATH = 0, 1, 5, 14, 15, 29


@dataclass(frozen=True)
class _Dynamic:
    """The dynamic section of an ELF library: its entries and its string table's file offset."""

    entries: list[tuple[int, int]]
    strtab: int

    def string(self, elf: bytes | bytearray, offset: int) -> tuple[int, int]:
        """(start, end) file offsets of the NUL-terminated string at ``offset``."""
        start = self.strtab + offset
        return start, elf.index(b"\0", start)


def _dynamic(elf: bytes | bytearray) -> _Dynamic | None:
    """The dynamic section of a 64-bit little-endian ELF file, or None."""
    if elf[:4] != b"\x7fELF" or len(elf) < 64 or elf[4] != 2 or elf[5] != 1:
        return None
    (phoff,) = struct.unpack_from("<Q", elf, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", elf, 0x36)
    # (type, flags, offset, vaddr, paddr, filesz) of each segment
    segments = [struct.unpack_from("<IIQQQQ", elf, phoff + i * phentsize) for i in range(phnum)]
    dynamic = next((seg for seg in segments if seg[0] == _PT_DYNAMIC), None)
    if dynamic is None:
        return None
    entries: list[tuple[int, int]] = []
    for pos in range(dynamic[2], dynamic[2] + dynamic[5], 16):
        tag, value = struct.unpack_from("<QQ", elf, pos)
        if tag == _DT_NULL:
            break
        entries.append((tag, value))
    address = dict(entries).get(_DT_STRTAB)
    load = next((seg for seg in segments if address is not None and seg[0] == _PT_LOAD
                 and seg[3] <= address < seg[3] + seg[5]), None)
    if address is None or load is None:
        return None
    return _Dynamic(entries, strtab=load[2] + address - load[3])


def needed(elf: bytes | bytearray) -> list[str]:
    """The libraries an ELF library names as DT_NEEDED, e.g. libpaddle.so."""
    dynamic = _dynamic(elf)
    if dynamic is None:
        return []
    names = []
    for tag, value in dynamic.entries:
        if tag == _DT_NEEDED:
            start, end = dynamic.string(elf, value)
            names.append(bytes(elf[start:end]).decode(errors="replace"))
    return names


def runpath(elf: bytes | bytearray) -> str | None:
    """The RUNPATH (or RPATH) of an ELF library, or None."""
    dynamic = _dynamic(elf)
    value = next((v for t, v in dynamic.entries if t in (_DT_RUNPATH, _DT_RPATH)), None) \
        if dynamic else None
    if dynamic is None or value is None:
        return None
    start, end = dynamic.string(elf, value)
    return bytes(elf[start:end]).decode(errors="replace")


def shipped_runpath(build_runpath: str) -> str:
    """The run path for an installed wheel, from the one Paddle's build wrote.

    Paddle's build points at the build machine's virtualenv (``.../site-packages/paddle/libs``)
    and Python; once installed, the library sits in site-packages beside ``paddle/``, so those
    entries become ``$ORIGIN/paddle/...``. Python's own folders go; anything else (the CUDA
    toolkit's lib64, where libcudart lives) stays.
    """
    entries: list[str] = []
    pythons = {str(Path(p).resolve()) for p in (sys.prefix, sys.base_prefix)}
    for entry in build_runpath.split(":"):
        match = re.search(r"/site-packages/(paddle(/.*)?)$", entry)
        if match:
            entry = f"$ORIGIN/{match.group(1)}"
        elif any(entry == p or entry.startswith(p + "/") for p in pythons):
            continue
        if entry and entry not in entries:
            entries.append(entry)
    return ":".join(entries)


def set_runpath(elf: bytearray, new_runpath: str) -> bool:
    """Replace the RUNPATH (or RPATH) of a 64-bit little-endian ELF library in place.

    The new path is written over the old string in the dynamic string table, padded with NULs,
    so nothing moves; it must not be longer. Returns False, changing nothing, when the library has
    no run path, the new one does not fit, or another entry shares the old string's bytes.
    """
    dynamic = _dynamic(elf)
    if dynamic is None:
        return False
    value = next((v for t, v in dynamic.entries if t in (_DT_RUNPATH, _DT_RPATH)), None)
    if value is None:
        return False
    start, end = dynamic.string(elf, value)
    # The linker may store a string as the tail of a longer one: keep shared bytes untouched.
    shared = False
    for tag, other in dynamic.entries:
        if tag in (_DT_NEEDED, _DT_SONAME):
            other_start, other_end = dynamic.string(elf, other)
            shared |= other_start <= end and other_end >= start
    new = new_runpath.encode()
    if len(new) > end - start or shared:
        return False
    elf[start:end] = new + b"\0" * (end - start - len(new))
    return True
