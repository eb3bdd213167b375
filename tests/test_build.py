"""Builds: the cached Paddle probe, the cache key, locked concurrent builds, readable compiler
errors, and wheels that install and run without the sources.

Tests marked ``build`` compile real ops (seconds each); the wheel test also installs Paddle into a
new virtualenv (about a minute with pip's download cache).
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import importlib.util
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import textwrap
import time
import types
import zipfile
from pathlib import Path

import pytest
from conftest import GPU_PYTHON, RELU6, run_opgen

from opgen import api, build, probe, wheel
from opgen.errors import BuildError, MergeError, ToolchainError, UsageError
from opgen.probe import PaddleInfo

CPU_INFO = PaddleInfo(version="3.3.1", with_cuda=False, cuda_version=None, gpu_count=0,
                      gpu_arches=())


def new_op(where: Path, forward: str = "x", backward: str = "auto") -> Path:
    """``opgen new t_op --elementwise`` in ``where``, with the given expressions (a backward
    other than ``auto`` is written by hand, as ``x: <backward>``)."""
    result = run_opgen("new", "t_op", "--elementwise", "--dir", str(where))
    assert result.returncode == 0, result.stderr
    op = where / "t_op"
    spec = op / "t_op.yaml"
    text = spec.read_text()
    if forward != "x" or backward != "auto":
        text = text.replace("  out: x ", f"  out: {forward} ", 1)
        if backward != "auto":
            text = text.replace("backward: auto ", f"backward:\n  x: {backward}\n#", 1)
        spec.write_text(text)
        result = run_opgen("generate", str(spec))
        assert result.returncode == 0, result.stderr
    return op


def fake_config(op: Path, **changes: object) -> build.BuildConfig:
    config = build.BuildConfig(name="t_op", op_dir=op, sources=(op / "csrc" / "t_op.cc",),
                               cuda=False, arches=(), cxx_flags=("-O3", "-std=c++17"),
                               cuda_flags=(), include_dirs=(op / "csrc",))
    return dataclasses.replace(config, **changes)


# -- the cache key ------------------------------------------------------------------------------


@pytest.fixture
def op(tmp_path, monkeypatch):
    monkeypatch.setattr(probe, "paddle_info", lambda: CPU_INFO)
    return new_op(tmp_path)


def test_key_is_stable(op):
    assert fake_config(op).key() == fake_config(op).key()
    os.utime(op / "csrc" / "t_op.cc")  # a touch is no change
    assert fake_config(op).key() == fake_config(op).key()


@pytest.mark.parametrize("change", [
    {"cxx_flags": ("-O2", "-std=c++17")},
    {"cuda": True, "arches": (90,), "cuda_flags": ("-gencode=arch=compute_90,code=sm_90",)},
    {"include_dirs": ()},
    {"env": {"CPLUS_INCLUDE_PATH": "/opt/cccl"}},
])
def test_key_covers_flags(op, change):
    assert fake_config(op, **change).key() != fake_config(op).key()


@pytest.mark.parametrize("edit", ["csrc/t_op.cc", "csrc/t_op.h", "csrc/opgen/elementwise.h"])
def test_key_covers_every_source(op, edit):
    before = fake_config(op).key()
    with (op / edit).open("a") as f:
        f.write("\n// edited\n")
    assert fake_config(op).key() != before


def test_key_covers_the_paddle_version_and_compiler(op, monkeypatch):
    before = fake_config(op).key()
    monkeypatch.setattr(probe, "paddle_info",
                        lambda: dataclasses.replace(CPU_INFO, version="3.3.2"))
    assert fake_config(op).key() != before
    monkeypatch.setattr(probe, "paddle_info", lambda: CPU_INFO)
    monkeypatch.setenv("CXX", "clang++-does-not-exist")
    assert fake_config(op).key() != before


def test_a_cuda_build_refuses_a_cuda_home_without_nvcc(op, monkeypatch, tmp_path):
    cuda_paddle = dataclasses.replace(CPU_INFO, with_cuda=True, cuda_version="12.6")
    monkeypatch.setattr(probe, "paddle_info", lambda: cuda_paddle)
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda-typo"))
    with pytest.raises(ToolchainError) as info:
        build.configure(op)
    assert str(info.value) == (f"CUDA_HOME={tmp_path / 'cuda-typo'} has no bin/nvcc: point it at "
                               "a CUDA toolkit, unset it, or build with --cpu-only")
    assert not build.configure(op, cpu_only=True).cuda  # a build without CUDA does not need it


def test_unfinished_build_is_not_used(op):
    config = fake_config(op)
    library = config.build_dir() / config.library / f"{config.library}.so"
    library.parent.mkdir(parents=True)
    library.write_bytes(b"half a library")  # the compiler was killed, say
    assert build.built_library(config) is None
    (config.build_dir() / build.MARKER).write_text("{}")
    assert build.built_library(config) == library


# -- the first compiler error -----------------------------------------------------------------


def test_error_in_a_forward_functor_names_the_spec(op):
    header = op / "csrc" / "t_op.h"
    header.write_text(header.read_text().replace("    out = x;", "    out = x * scale;"))
    line = header.read_text().splitlines().index("    out = x * scale;") + 1
    log = (f"In file included from {op}/csrc/t_op.cc:6:\n"
           f"{header}:{line}:15: error: 'scale' was not declared in this scope\n"
           f"{line} |     out = x * scale;\n")
    message = build.first_error(log, fake_config(op))
    assert message.splitlines() == [
        f"{_shown(header, op)}:{line}:15: 'scale' was not declared in this scope",
        "    out = x * scale;",
        "              ^",
        f"  from the spec: {_shown(op / 't_op.yaml', op)}:15: forward.out: x "
        "(csrc/t_op.h was edited after `opgen generate`)",
    ]


def test_error_in_a_backward_functor_from_nvcc(tmp_path, monkeypatch):
    monkeypatch.setattr(probe, "paddle_info", lambda: CPU_INFO)
    op = new_op(tmp_path, forward="x * x", backward="2 * x * grad_out")
    header = op / "csrc" / "t_op.h"
    line = next(i for i, row in enumerate(header.read_text().splitlines(), 1)
                if row.strip().startswith("grad_x = "))
    log = f"{header}({line}): error: no instance of overloaded function matches\n"
    message = build.first_error(log, fake_config(op))
    assert f"{_shown(header, op)}:{line}: no instance of overloaded function" in message
    assert message.endswith(f"from the spec: {_shown(op / 't_op.yaml', op)}:20: "
                            "backward.x: 2 * x * grad_out")


def test_error_instantiated_from_a_functor_line(op):
    header = op / "csrc" / "t_op.h"
    line = header.read_text().splitlines().index("    out = x;") + 1
    launcher = op / "csrc" / "opgen" / "elementwise.h"
    log = (f"{header}:{line}:11:   required from here\n"
           f"{launcher}:40:5: error: invalid operands to binary expression\n")
    message = build.first_error(log, fake_config(op))
    assert message.startswith(f"{_shown(launcher, op)}:40:5: invalid operands")
    assert "from the spec:" in message and "forward.out: x" in message


def test_error_outside_the_functors_has_no_spec_line(op):
    source = op / "csrc" / "t_op.cc"
    log = f"{source}:3:1: error: 'foo' does not name a type\n"
    message = build.first_error(log, fake_config(op))
    assert message.startswith(f"{_shown(source, op)}:3:1: 'foo' does not name a type")
    assert "spec" not in message


def test_link_error_and_unknown_failures(op):
    log = "t_op.o: in function `f':\nt_op.cc:(.text+0x1): undefined reference to `g'\n"
    assert build.first_error(log, fake_config(op)).startswith("link error: ")
    assert build.first_error("one\ntwo\n", fake_config(op)) == "build failed:\none\ntwo"


def test_a_load_failure_is_reported_by_its_exception_line(op):
    log = textwrap.dedent("""\
        Traceback (most recent call last):
          File "/x/extension_utils.py", line 1, in _import_module_from_library
            op_names = load_op_meta_info_and_register_op(lib_filename)
        ValueError: (InvalidArgument) Operator custom_sq has been registered.
          [Hint: Expected ... ] (at /paddle/paddle/fluid/framework/op_registry.h:42)
        """)
    assert build.first_error(log, fake_config(op)) == \
        "ValueError: (InvalidArgument) Operator custom_sq has been registered."
    wrapper = "RuntimeError: Error building extension 'x'\n"
    assert build.first_error("one\n" + wrapper, fake_config(op)).startswith("build failed:")


def test_functor_line(op):
    header = op / "csrc" / "t_op.h"
    rows = header.read_text().splitlines()
    assert build.functor_line(header, rows.index("    out = x;") + 1) == ("Forward", "out")
    assert build.functor_line(header, rows.index("    grad_x = grad_out;") + 1) == \
        ("Backward", "grad_x")
    assert build.functor_line(header, rows.index("struct Forward {") + 1) is None
    assert build.functor_line(header, 1) is None


def _shown(path: Path, op: Path) -> str:
    """``path`` as build messages show it: from the working directory, else the op's parent."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path.resolve().relative_to(op.resolve().parent))


# -- the wheel's pieces -------------------------------------------------------------------------


OLD_RUNPATH = "/build/machine/venv/lib/python3.11/site-packages/paddle/libs"


@pytest.fixture
def tiny_library(tmp_path) -> Path:
    """A shared library with a long RUNPATH, as Paddle's builds have, and no device code."""
    cc = shutil.which("cc") or pytest.skip("no C compiler")
    source = tmp_path / "lib.c"
    source.write_text("#include <math.h>\ndouble f(double x) { return sin(x); }\n")
    library = tmp_path / "lib.so"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(library), str(source),
                    f"-Wl,-rpath,{OLD_RUNPATH}", "-Wl,--enable-new-dtags", "-lm"], check=True)
    return library


def _runpath(library: Path) -> str | None:
    readelf = shutil.which("readelf") or pytest.skip("no readelf")
    dynamic = subprocess.run([readelf, "-d", str(library)], capture_output=True, text=True,
                             check=True).stdout
    return next((line.split("[", 1)[1].rstrip("]") for line in dynamic.splitlines()
                 if "(RUNPATH)" in line), None)


def test_set_runpath_rewrites_in_place(tiny_library):
    data = bytearray(tiny_library.read_bytes())
    size = len(data)
    assert wheel.runpath(data) == OLD_RUNPATH
    assert wheel.set_runpath(data, "$ORIGIN/paddle/libs")
    assert len(data) == size and OLD_RUNPATH.encode() not in data
    tiny_library.write_bytes(data)
    assert _runpath(tiny_library) == wheel.runpath(data) == "$ORIGIN/paddle/libs"
    assert "libm.so.6" in wheel.needed(data)
    assert not wheel.set_runpath(bytearray(data), "/x" * 200)  # too long: left alone
    assert not wheel.set_runpath(bytearray(b"not an elf file"), "/x")
    assert wheel.runpath(b"not an elf file") is None


def test_shipped_runpath_points_into_site_packages():
    venv = "/build/venv/lib/python3.11/site-packages"
    python_lib = str(Path(sys.base_prefix).resolve() / "lib")
    build_runpath = f"{python_lib}:{venv}/paddle/libs:/usr/local/cuda-13.0/lib64:{venv}/paddle/base"
    assert wheel.shipped_runpath(build_runpath) == \
        "$ORIGIN/paddle/libs:/usr/local/cuda-13.0/lib64:$ORIGIN/paddle/base"


def test_wheel_tag_names_this_interpreter():
    tag = wheel.wheel_tag()
    python = f"cp{sys.version_info.major}{sys.version_info.minor}"
    assert tag.startswith(f"{python}-{python}-") and "-" not in tag.split("-", 2)[2]


# -- which library the wrapper loads -------------------------------------------------------------

# An installed relu6_lib (from `pip install` of the op, or its wheel) that records its calls.
FAKE_INSTALLED_LIB = """
calls = []


def custom_relu6(*args):
    calls.append(args)
    return "installed relu6_lib"
"""


@pytest.fixture
def installed_lib(tmp_path, monkeypatch):
    """A fake installed ``relu6_lib`` on sys.path, and the folder builds the wrapper asks for."""
    site = tmp_path / "site-packages"
    site.mkdir()
    (site / "relu6_lib.py").write_text(FAKE_INSTALLED_LIB)
    monkeypatch.syspath_prepend(str(site))
    folder_builds: list[Path] = []

    class FolderBuild:
        @staticmethod
        def custom_relu6(*args: object) -> str:
            return "folder build"

    def load_library(op_dir: Path) -> type[FolderBuild]:
        folder_builds.append(Path(op_dir))
        return FolderBuild

    monkeypatch.setattr(build, "load_library", load_library)
    # The wrapper then calls the library's own API, not Paddle's C++ entry with the op's name
    # (``_C_ops``'s, or ``core.eager``'s as on Paddle 2.6), so the fakes above show which
    # library it loaded.
    import paddle

    monkeypatch.setattr(paddle._C_ops, "_run_custom_op", None, raising=False)
    eager = getattr(paddle.base.core, "eager", None)
    if eager is not None:
        monkeypatch.setattr(eager, "_run_custom_op", None, raising=False)
    yield site, folder_builds
    sys.modules.pop("relu6_lib", None)


def _import_wrapper(path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(f"wrapper_{abs(hash(path))}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_wrapper_beside_its_sources_uses_their_build_over_an_installed_library(
        tmp_path, installed_lib):
    """After `pip install` of an op, `opgen test` in its folder still tests the folder's sources."""
    import paddle

    _, folder_builds = installed_lib
    op = tmp_path / "relu6"
    shutil.copytree(RELU6, op, ignore=shutil.ignore_patterns("build", "dist"))
    wrapper = _import_wrapper(op / "relu6.py")
    assert wrapper.relu6(paddle.ones([3])) == "folder build"
    assert folder_builds == [op]
    assert "relu6_lib" not in sys.modules


def test_wrapper_installed_without_sources_uses_the_installed_library(tmp_path, installed_lib):
    import paddle

    site, folder_builds = installed_lib
    shutil.copy(RELU6 / "relu6.py", site / "relu6.py")  # the wheel's (and setup.py's) layout
    wrapper = _import_wrapper(site / "relu6.py")
    assert wrapper.relu6(paddle.ones([3]), threshold=2.5) == "installed relu6_lib"
    assert folder_builds == []
    (call,) = sys.modules["relu6_lib"].calls
    assert call[1] == struct.unpack("q", struct.pack("d", 2.5))[0]


# -- the CLI's user errors ------------------------------------------------------------------------


@pytest.mark.parametrize("args, message", [
    (["build", "no/such/op"], "no/such/op: no such op folder"),
    (["build", "examples/relu6/relu6.yaml"],
     "examples/relu6/relu6.yaml: a file; name the op's folder (examples/relu6)"),
    (["build", "examples/relu6", "--arch", "sm_x"], "--arch: expected compute capabilities"),
    (["build", "examples/relu6", "--arch", "12"], "is not a CUDA compute capability"),
    (["build", "examples/relu6", "--arch", ""], "--arch: empty; give compute capabilities"),
    (["build", "examples/relu6", "--arch", "90", "--cpu-only"],
     "--arch: a --cpu-only build has no CUDA code"),
    (["build", "examples/relu6", "--wheel-dir", "dist"], "go with --wheel"),
    (["build", "examples/relu6", "--wheel", "--wheel-version", "1.0 beta"],
     "--wheel-version: '1.0 beta' is not a version"),
])
def test_build_user_errors_are_one_line(args, message):
    result = run_opgen(*args)
    assert result.returncode == 2
    assert result.stderr.startswith("error: ") and message in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


# -- real builds ----------------------------------------------------------------------------------


@pytest.mark.build
def test_unchanged_op_is_not_rebuilt_and_a_change_rebuilds(tmp_path):
    """An unchanged op's build is the cached library as it was (the file untouched); how long
    that takes is printed, not asserted (about 0.3 s here, several seconds on a loaded machine)."""
    op = new_op(tmp_path, forward="x * 2")
    first = run_opgen("build", str(op))
    assert first.returncode == 0, first.stderr
    assert "t_op: built (CPU)" in first.stdout
    library = Path(first.stdout.strip().split(": ")[-1])
    before = library.stat()
    for _ in range(2):
        start = time.perf_counter()
        again = run_opgen("build", str(op))
        elapsed = time.perf_counter() - start
        assert again.returncode == 0 and "up to date" in again.stdout, again.stderr
        assert Path(again.stdout.strip().split(": ")[-1]) == library
        after = library.stat()
        assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    print(f"unchanged rebuild: {elapsed:.2f} s")
    spec = op / "t_op.yaml"
    spec.write_text(spec.read_text().replace("out: x * 2", "out: x * 3"))
    assert run_opgen("generate", str(spec)).returncode == 0
    changed = run_opgen("build", str(op))
    assert changed.returncode == 0 and "t_op: built (CPU)" in changed.stdout, changed.stderr
    assert changed.stdout.split(": ")[-1] != first.stdout.split(": ")[-1]  # a new build folder


_RANK = r"""
import json, os, sys, time
import numpy as np
import opgen
import opgen.build as b

compiles = []
real = b._compile

def counted(config, **kwargs):
    compiles.append(os.getpid())
    return real(config, **kwargs)

b._compile = counted
print("ready", flush=True)
sys.stdin.readline()  # every rank starts here at once
start = time.perf_counter()
ops = opgen.load(sys.argv[1], cpu_only=True)
seconds = time.perf_counter() - start
import paddle
x = np.linspace(-3, 3, 101).astype("float32")
y = ops.t_op(paddle.to_tensor(x)).numpy()
print(json.dumps({"pid": os.getpid(), "compiles": len(compiles), "seconds": seconds,
                  "ok": bool(np.allclose(y, x * 2 + 1))}), flush=True)
"""


@pytest.mark.build
def test_four_processes_compile_once_and_all_run_the_op(tmp_path):
    op = new_op(tmp_path, forward="x * 2 + 1", backward="2 * grad_out")
    env = {**os.environ, "GLOG_minloglevel": "3"}
    ranks = [subprocess.Popen([sys.executable, "-c", _RANK, str(op)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for _ in range(4)]
    for rank in ranks:
        assert rank.stdout is not None and rank.stdout.readline().strip() == "ready"
    start = time.perf_counter()
    for rank in ranks:
        assert rank.stdin is not None
        rank.stdin.write("go\n")
        rank.stdin.flush()
    outputs = [rank.communicate(timeout=600) for rank in ranks]
    elapsed = time.perf_counter() - start
    results = []
    for rank, (stdout, stderr) in zip(ranks, outputs, strict=True):
        assert rank.returncode == 0, stderr[-3000:]
        results.append(json.loads(stdout.strip().splitlines()[-1]))
    assert all(r["ok"] for r in results), results
    compiled = [r for r in results if r["compiles"]]
    assert len(compiled) == 1 and compiled[0]["compiles"] == 1, results
    (marker,) = (op / "build").glob(f"*/{build.MARKER}")
    record = json.loads(marker.read_text())
    assert record["pid"] == compiled[0]["pid"]
    print(f"4 parallel builds: {elapsed:.1f} s; the one compile: {record['seconds']} s")


@pytest.mark.build
def test_broken_functor_line_names_the_spec_expression(tmp_path):
    op = new_op(tmp_path, forward="x * 2")
    header = op / "csrc" / "t_op.h"
    header.write_text(header.read_text().replace("out = x * MT(2);", "out = x * scale;"))
    line = header.read_text().splitlines().index("    out = x * scale;") + 1
    result = run_opgen("build", str(op), cwd=tmp_path)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert lines[0].startswith(f"error: t_op/csrc/t_op.h:{line}:15: 'scale' was not declared"), \
        lines
    assert lines[1:4] == ["    out = x * scale;", "              ^",
                          "  from the spec: t_op/t_op.yaml:15: forward.out: x * 2 "
                          "(csrc/t_op.h was edited after `opgen generate`)"]
    assert lines[4].startswith("  full log: t_op/build/") and len(lines) == 5
    assert "Traceback" not in result.stderr


@pytest.mark.build
def test_broken_kernel_edit_shows_the_first_error(tmp_path):
    op = new_op(tmp_path)
    source = op / "csrc" / "t_op.cc"
    text = source.read_text()
    assert "return {x_shape};" in text
    source.write_text(text.replace("return {x_shape};", "return {x_shape}"))
    result = run_opgen("build", str(op), cwd=tmp_path)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert lines[0].startswith("error: t_op/csrc/t_op.cc:"), lines
    assert "expected ';'" in lines[0]
    assert "spec" not in result.stderr and "Traceback" not in result.stderr
    assert len(lines) <= 5


def broken_op(where: Path) -> Path:
    """An op whose kernel file has a syntax error (a missing ';')."""
    op = new_op(where)
    source = op / "csrc" / "t_op.cc"
    source.write_text(source.read_text().replace("return {x_shape};", "return {x_shape}"))
    return op


_COUNT_COMPILES = """
import os, time
import opgen.build as _build

_real = _build._compile


def _counted(config, **kwargs):
    with open(os.environ["OPGEN_TEST_COMPILES"], "a") as log:
        log.write(f"start {time.time()}\\n")
    try:
        return _real(config, **kwargs)
    finally:
        with open(os.environ["OPGEN_TEST_COMPILES"], "a") as log:
            log.write(f"end {time.time()}\\n")


_build._compile = _counted
"""


@pytest.fixture
def compiles(tmp_path) -> tuple[dict[str, str], Path]:
    """An environment in which every Python process (opgen, pytest under `opgen test`) logs the
    start and end of each compile it runs, and the log."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(_COUNT_COMPILES)
    log = tmp_path / "compiles.log"
    path = os.pathsep.join(filter(None, [str(hook), os.environ.get("PYTHONPATH")]))
    return {"PYTHONPATH": path, "OPGEN_TEST_COMPILES": str(log)}, log


def test_conflict_markers_are_refused_before_the_compiler(tmp_path):
    op = new_op(tmp_path)
    header = op / "csrc" / "t_op.h"
    rows = header.read_text().splitlines(keepends=True)
    at = rows.index("    out = x;\n")
    rows[at:at + 1] = ["<<<<<<< ours\n", "    out = x * 2;\n", "=======\n", "    out = x;\n",
                       ">>>>>>> new render\n"]
    header.write_text("".join(rows))
    expected = (f"error: t_op/csrc/t_op.h:{at + 1}: unresolved merge conflict (keep the lines "
                "you want, delete the <<<<<<< ======= >>>>>>> markers, then build again)\n")
    for command in (["build"], ["test", "--device", "cpu"]):
        result = run_opgen(command[0], str(op), *command[1:], cwd=tmp_path)
        assert (result.returncode, result.stderr) == (1, expected), command
        assert "test session starts" not in result.stdout
    assert not (op / "build").exists()  # the compiler never ran
    with pytest.raises(MergeError, match=f"t_op.h:{at + 1}: unresolved merge conflict"):
        api.load_op(op)

    header.write_text(header.read_text().replace("<<<<<<< ours\n", "").replace(
        "=======\n    out = x;\n>>>>>>> new render\n", ""))
    test_file = op / "test_t_op.py"
    test_file.write_text(test_file.read_text() + "<<<<<<< before updating\n")
    result = run_opgen("test", str(op), "--device", "cpu", cwd=tmp_path)
    assert result.returncode == 1 and result.stderr.startswith(
        f"error: t_op/test_t_op.py:{len(test_file.read_text().splitlines())}: unresolved merge")
    assert not (op / "build").exists()


def _conflict(path: Path, line: str) -> int:
    """Wrap ``line`` of ``path`` in a conflict block as a regenerate writes it (its own text on
    both sides, so the file still reads as it did around it); the block's first line number."""
    rows = path.read_text().splitlines(keepends=True)
    at = rows.index(line)
    rows[at:at + 1] = ["<<<<<<< ours\n", line, "=======\n", line, ">>>>>>> new render\n"]
    path.write_text("".join(rows))
    return at + 1


def _refusal(where: str) -> str:
    return (f"error: {where}: unresolved merge conflict (keep the lines you want, delete the "
            "<<<<<<< ======= >>>>>>> markers, then build again)\n")


def test_conflict_markers_in_the_wrapper_are_refused_by_build_load_test_and_bench(tmp_path):
    # The refusal used to scan csrc/ alone: `opgen build` built the op, opgen.load raised a raw
    # SyntaxError at the `<<<<<<< ours` line, and `opgen bench` failed mid-way on it.
    op = new_op(tmp_path)
    wrapper = op / "t_op.py"
    line = next(r for r in wrapper.read_text().splitlines(keepends=True)
                if r.startswith("def t_op("))
    at = _conflict(wrapper, line)
    expected = _refusal(f"t_op/t_op.py:{at}")
    for command in (["build", "--cpu-only"], ["build"], ["test", "--device", "cpu"],
                    ["bench", "--device", "cpu"]):
        result = run_opgen(command[0], str(op), *command[1:], cwd=tmp_path)
        assert (result.returncode, result.stderr) == (1, expected), command
    assert not (op / "build").exists()  # refused before anything compiled, or was rendered
    with pytest.raises(MergeError, match=f"t_op.py:{at}: unresolved merge conflict"):
        api.load_op(op, cpu_only=True)
    load = ("import sys, opgen\ntry:\n    opgen.load(sys.argv[1])\nexcept opgen.OpgenError "
            "as exc:\n    print(type(exc).__name__, exc.exit_code, exc)\n")
    result = subprocess.run([sys.executable, "-c", load, str(op)], capture_output=True,
                            text=True, cwd=tmp_path, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"MergeError 1 {expected[len('error: '):]}"
    assert not (op / "build").exists()


def test_conflict_markers_inside_a_docstring_are_refused_by_load(tmp_path, monkeypatch):
    # A block inside a string still parses, so importing the wrapper never noticed it.
    monkeypatch.setattr(probe, "paddle_info", lambda: CPU_INFO)
    op = new_op(tmp_path)
    wrapper = op / "t_op.py"
    line = next(r for r in wrapper.read_text().splitlines(keepends=True)
                if r.lstrip().startswith("x:"))
    at = _conflict(wrapper, line)
    compile(wrapper.read_text(), str(wrapper), "exec")  # valid Python: only the scan sees it
    monkeypatch.chdir(tmp_path)
    with pytest.raises(MergeError, match=f"^t_op/t_op.py:{at}: unresolved merge conflict"):
        api.load_op(op, cpu_only=True)
    with pytest.raises(MergeError, match=f"^t_op/t_op.py:{at}: "):
        build.load_library(op, cpu_only=True)  # the wrapper's own way to its library
    assert not (op / "build").exists()


@pytest.mark.parametrize("generated", ["README.md", "setup.py", "test_t_op.py"])
def test_conflict_markers_in_any_generated_file_are_refused(tmp_path, monkeypatch, generated):
    monkeypatch.setattr(probe, "paddle_info", lambda: CPU_INFO)
    monkeypatch.chdir(tmp_path)
    op = new_op(tmp_path)
    path = op / generated
    at = _conflict(path, path.read_text().splitlines(keepends=True)[2])
    message = f"^t_op/{generated}:{at}: unresolved merge conflict"
    for refused in (lambda: build.configure(op), lambda: api.load_op(op, cpu_only=True),
                    lambda: api.build_op(op, cpu_only=True), lambda: api.test(op)):
        with pytest.raises(MergeError, match=message):
            refused()
    assert not (op / "build").exists()


def test_the_refusal_scans_the_files_the_answers_file_records(tmp_path, monkeypatch):
    monkeypatch.setattr(probe, "paddle_info", lambda: CPU_INFO)
    monkeypatch.chdir(tmp_path)
    op = new_op(tmp_path)
    from opgen.writer import ANSWERS_FILE, recorded_answers

    assert build.ANSWERS_FILE == ANSWERS_FILE
    recorded = list(recorded_answers(op)["files"])
    assert build.recorded_files(op) == recorded and "README.md" in recorded
    assert {p.relative_to(op).as_posix() for p in build.generated_files(op, "t_op")} == \
        set(recorded)
    # A recorded file outside csrc/ that is no part of the build (one a later opgen may write)
    # is scanned too; the user's own files, and files the record lists outside the folder, not.
    answers = op / ANSWERS_FILE
    text = answers.read_text()
    answers.write_text(text.replace("\nfiles:\n", "\nfiles:\n  'docs/it''s.md': " + "0" * 64
                                    + "\n  ../outside.md: " + "0" * 64 + "\n", 1))
    assert build.recorded_files(op)[:2] == ["docs/it's.md"] + recorded[:1]
    for name in ("notes.md", "../outside.md"):
        (op / name).write_text("<<<<<<< ours\n")
    build.op_folder(op)
    (op / "docs").mkdir()
    (op / "docs" / "it's.md").write_text("text\n>>>>>>> new render\n")
    with pytest.raises(MergeError, match="^t_op/docs/it's.md:2: unresolved merge conflict"):
        build.op_folder(op)
    # Without a readable record the op's sources, wrapper and tests are still scanned.
    answers.write_bytes(b"\xff")
    assert build.recorded_files(op) == []
    at = _conflict(op / "t_op.py", (op / "t_op.py").read_text().splitlines(keepends=True)[0])
    with pytest.raises(MergeError, match=f"^t_op/t_op.py:{at}: "):
        build.op_folder(op)


@pytest.mark.parametrize("path", ["csrc/opgen/math.h", "it's.yaml", "'q'.yaml", '"q".yaml',
                                  "x: y.yaml", "#x.yaml", "- x.yaml", "yes", "über.yaml",
                                  "日本.yaml", "tab\t.yaml", "x" * 130 + ".yaml"])
def test_recorded_files_reads_the_answers_file_as_yaml_does(tmp_path, path):
    # Read without yaml where it can be (a wrapper's load must not import it), with it otherwise.
    import yaml

    files = {"README.md": "0" * 64, path: "1" * 64}
    (tmp_path / build.ANSWERS_FILE).write_text(yaml.safe_dump(
        {"spec": "x.yaml", "files": files, "later": {"key": "0" * 64}}, sort_keys=False))
    assert build.recorded_files(tmp_path) == list(files)


@pytest.mark.build
def test_opgen_test_stops_at_a_failed_build_with_its_first_error(tmp_path, compiles):
    op = broken_op(tmp_path)
    env, log = compiles
    result = run_opgen("test", str(op), "--device", "cpu", cwd=tmp_path, env=env)
    finished = time.time()
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert lines[0].startswith("error: t_op/csrc/t_op.cc:") and "expected ';'" in lines[0], lines
    assert "Traceback" not in result.stderr and "test session starts" not in result.stdout
    events = log.read_text().split()
    assert events[::2] == ["start", "end"], events  # one compile, in any process
    assert finished - float(events[3]) < 10, "opgen test went on after the build failed"


@pytest.mark.build
def test_generated_tests_compile_a_broken_op_once(tmp_path, compiles):
    """Run straight from pytest, each test builds on first use: a failed build is not retried."""
    op = broken_op(tmp_path)
    env, log = compiles
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "test_t_op.py", "-q", "-p", "no:cacheprovider",
         "-k", "test_forward and float32 and not views"],
        capture_output=True, text=True, cwd=op, check=False,
        env={**os.environ, "OPGEN_TEST_DEVICES": "cpu", "GLOG_minloglevel": "3", **env})
    assert result.returncode == 1
    # every shape, the empty ones too: Paddle 3 takes an op's empty outputs, so the wrapper calls
    # the op for them as for any other (Paddle 2.6 makes them without the op)
    assert "6 failed" in result.stdout, result.stdout[-2000:]
    assert "expected ';'" in result.stdout and "failed earlier in this process" in result.stdout
    assert log.read_text().split()[::2] == ["start", "end"]


# -- wheels -------------------------------------------------------------------------------------


def _wheel_files(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def _check_record(files: dict[str, bytes]) -> None:
    (record_name,) = [n for n in files if n.endswith(".dist-info/RECORD")]
    rows = [row.split(",") for row in files[record_name].decode().splitlines()]
    assert {row[0] for row in rows} == set(files)
    for name, digest, size in rows:
        if name == record_name:
            continue
        expected = base64.urlsafe_b64encode(hashlib.sha256(files[name]).digest()).rstrip(b"=")
        assert digest == f"sha256={expected.decode()}" and int(size) == len(files[name]), name


@pytest.mark.build
def test_cpu_wheel_installs_and_runs_in_a_fresh_virtualenv(tmp_path):
    dist = tmp_path / "dist"
    result = run_opgen("build", str(RELU6), "--cpu-only", "--wheel", "--wheel-dir", str(dist))
    assert result.returncode == 0, result.stderr
    (whl,) = dist.glob("*.whl")
    python = f"cp{sys.version_info.major}{sys.version_info.minor}"
    assert whl.name.startswith("relu6_lib-0.1.0+") and f"-{python}-{python}-linux_" in whl.name
    files = _wheel_files(whl)
    dist_info = next(n.split("/")[0] for n in files if n.endswith("/METADATA"))
    assert sorted(files) == sorted(["relu6.py", "relu6_lib.py", "relu6_lib_pd_.so",
                                    *(f"{dist_info}/{n}" for n in
                                      ("METADATA", "WHEEL", "top_level.txt", "RECORD"))])
    _check_record(files)
    assert b"Requires-Dist: paddlepaddle==3.3.1" in files[f"{dist_info}/METADATA"]
    (tmp_path / "lib.so").write_bytes(files["relu6_lib_pd_.so"])
    # Not the build machine's virtualenv: where Paddle is once both are installed.
    assert _runpath(tmp_path / "lib.so") == "$ORIGIN/paddle/libs:$ORIGIN/paddle/base"

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    install = subprocess.run([str(py), "-m", "pip", "install", "-q", "paddlepaddle==3.3.1",
                              str(whl)], capture_output=True, text=True, check=False)
    assert install.returncode == 0, install.stdout[-2000:] + install.stderr[-2000:]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    script = """
import importlib.util, sys
import numpy as np, paddle
import relu6
assert importlib.util.find_spec("opgen") is None, "opgen must not be installed here"
x = np.linspace(-3, 9, 97).astype("float32")
y = relu6.relu6(paddle.to_tensor(x), threshold=2.5).numpy()
np.testing.assert_array_equal(y, np.clip(x, 0, 2.5))
np.testing.assert_array_equal(relu6.relu6(paddle.to_tensor(x)).numpy(), np.clip(x, 0, 6))
print(relu6._ops().__name__, relu6._ops().__file__)
"""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    run = subprocess.run([str(py), "-c", script], capture_output=True, text=True, cwd=elsewhere,
                         env={**env, "GLOG_minloglevel": "3"}, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.split()[0] == "relu6_lib" and str(venv) in run.stdout


@pytest.mark.build
@pytest.mark.gpu_env
def test_gpu_wheel_has_sm80_sm90_cubins_and_compute90_ptx(tmp_path):
    if not GPU_PYTHON.exists():
        pytest.skip("no .venv-gpu")
    op = tmp_path / "relu6"
    shutil.copytree(RELU6, op, ignore=shutil.ignore_patterns("build", "dist"))
    dist = tmp_path / "dist"
    result = run_opgen("build", str(op), "--wheel", "--arch", "80,90", "--wheel-dir", str(dist),
                       python=GPU_PYTHON)
    assert result.returncode == 0, result.stderr
    assert "(sm_80, sm_90 cubins + compute_90 PTX; needs paddlepaddle-gpu==2.6.2, " \
           "libcudart.so.13)" in result.stdout
    (whl,) = dist.glob("*.whl")
    unpacked = tmp_path / "unpacked"
    with zipfile.ZipFile(whl) as archive:
        archive.extractall(unpacked)
    sass, ptx = wheel.device_code(unpacked / "relu6_lib_pd_.so")
    assert (sass, ptx) == ({80, 90}, {90})
    # The GPU build's loader and op also run on CPU tensors, from the unpacked wheel alone.
    script = """
import numpy as np, paddle, relu6
x = np.linspace(-3, 9, 97).astype("float32")
np.testing.assert_array_equal(relu6.relu6(paddle.to_tensor(x), 2.5).numpy(), np.clip(x, 0, 2.5))
print(relu6._ops().__file__)
"""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run = subprocess.run([str(GPU_PYTHON), "-c", script], capture_output=True, text=True,
                         cwd=elsewhere, check=False,
                         env={**os.environ, "PYTHONPATH": str(unpacked), "GLOG_minloglevel": "3"})
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip() == str(unpacked / "relu6_lib.py")


def test_wheel_refuses_a_library_without_the_requested_arches(op, tmp_path, tiny_library):
    config = fake_config(op, cuda=True, arches=(80, 90))
    assert wheel.device_code(tiny_library) == (set(), set())
    with pytest.raises(BuildError, match="expected sm_"):
        wheel.build_wheel(config, tiny_library, tmp_path / "dist")
    assert not (tmp_path / "dist").exists()


@pytest.mark.parametrize("text", ["80,90", "80, 90", " 90 ,80", "sm_80,sm_90", "90,80,90", "86"])
def test_setup_py_reads_opgen_arch_as_build_reads_arch(text, tmp_path, monkeypatch):
    """The generated setup.py and `opgen build --arch` agree on what an arch list means."""
    import runpy
    import sys
    import types

    from opgen.render import render_op
    from opgen.spec import load

    setup_py = tmp_path / "setup.py"
    setup_py.write_bytes(render_op(load(RELU6 / "relu6.yaml")).files["setup.py"])
    seen = {}
    extension = types.ModuleType("paddle.utils.cpp_extension")
    extension.CUDAExtension = lambda **kwargs: seen.update(kwargs)
    extension.CppExtension = extension.CUDAExtension
    extension.setup = lambda **kwargs: None
    paddle = types.ModuleType("paddle")
    paddle.device = types.SimpleNamespace(is_compiled_with_cuda=lambda: True)
    for name, module in (("paddle", paddle), ("paddle.utils", types.ModuleType("paddle.utils")),
                         ("paddle.utils.cpp_extension", extension)):
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setenv("OPGEN_ARCH", text)
    runpy.run_path(str(setup_py))
    nvcc = seen["extra_compile_args"]["nvcc"]
    cubins = [int(flag.rsplit("sm_", 1)[1]) for flag in nvcc if "code=sm_" in flag]
    ptx = [flag.rsplit("compute_", 1)[1] for flag in nvcc if "code=compute_" in flag]
    arches = build.parse_arches(text)
    assert cubins == list(arches)
    assert ptx == [str(max(arches))]


@pytest.mark.parametrize(("where", "env", "message"), [
    ("plain", {"CXX": "/nonexistent/g++"},
     "the C++ compiler /nonexistent/g++ (from $CXX) was not found"),
    ("with space", {}, "the op's path has whitespace in it, which Paddle's builder"),
])
def test_what_paddles_builder_would_fail_on_is_named_first(tmp_path, where, env, message):
    """A missing compiler, or a path Paddle's builder runs unquoted through a shell: one error
    line naming the cause, before the compiler would run (it used to be a Python traceback of
    Paddle's builder)."""
    folder = tmp_path / where
    folder.mkdir()
    assert run_opgen("new", "my_op", "--elementwise", "--dir", str(folder)).returncode == 0
    result = run_opgen("build", str(folder / "my_op"), "--cpu-only", env=env)
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and message in result.stderr, result.stderr
    assert not list((folder / "my_op").glob("build/*/build.log"))


def test_a_wheel_dir_that_is_a_file_is_refused_before_compiling(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("mine")
    assert run_opgen("new", "my_op", "--elementwise", "--dir", str(tmp_path)).returncode == 0
    result = run_opgen("build", str(tmp_path / "my_op"), "--cpu-only", "--wheel", "--wheel-dir",
                       str(afile))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "exists and is not a folder" in result.stderr
    assert not (tmp_path / "my_op" / "build").exists() and afile.read_text() == "mine"


def test_load_test_and_build_scan_the_op_for_conflict_markers_once(tmp_path, monkeypatch):
    monkeypatch.setattr(probe, "paddle_info", lambda: CPU_INFO)
    op = new_op(tmp_path)
    scans = []
    scan = build.refuse_conflicts
    monkeypatch.setattr(build, "refuse_conflicts", lambda *a: scans.append(a) or scan(*a))
    loaded = types.ModuleType("t_op_lib")
    monkeypatch.setattr(build, "load_configured", lambda config, verbose=False: loaded)
    for call in (lambda: api.load_op(op, cpu_only=True),
                 lambda: api.test(op, device="cpu", build_with=lambda config: None,
                                  pytest_args=["--collect-only", "-q"]),
                 lambda: api.build_op(op, cpu_only=True, build_with=lambda config: None)):
        scans.clear()
        call()
        assert len(scans) == 1
    assert api.load_op(op, cpu_only=True)._library is loaded


@pytest.mark.parametrize("damage", ["folder", "loop", "latin-1"])
def test_a_source_that_is_no_utf8_file_is_named_before_the_compile(tmp_path, monkeypatch, damage):
    """A csrc/<name>.cc that is a folder or a loop of links failed inside Paddle's loader with its
    traceback, and one that is not UTF-8 with a UnicodeDecodeError: both named no file."""
    monkeypatch.setattr(probe, "paddle_info", lambda: CPU_INFO)
    monkeypatch.chdir(tmp_path)
    op = new_op(tmp_path)
    source = op / "csrc" / "t_op.cc"
    if damage == "latin-1":
        source.write_bytes(source.read_bytes() + "// café\n".encode("latin-1"))
        why = "not UTF-8 text (byte"
    else:
        source.unlink()
        if damage == "folder":
            source.mkdir()
            why = "a folder, not a source file"
        else:
            source.symlink_to(source)
            why = "too many levels of symbolic links, not a source file"
    with pytest.raises(BuildError, match=f"^t_op/csrc/t_op.cc: {re.escape(why)}"):
        build.configure(op, cpu_only=True)
    assert not (op / "build").exists()


def test_the_op_is_the_recorded_source_where_csrc_holds_others(tmp_path):
    """A helper .cc beside the op's own (or one an op renamed in place left) made every build,
    test and bench say "not a generated op folder", which `opgen generate` did not change."""
    op = tmp_path / "relu6"
    shutil.copytree(RELU6, op, ignore=shutil.ignore_patterns("build"))
    (op / "csrc" / "helper.cc").write_text("// the user's\n")
    assert build.find_op(op) == "relu6"
    (op / "relu6.py").rename(op / "relu6_wrapper.py")  # the recorded .cc has no wrapper beside it
    with pytest.raises(UsageError, match=r"csrc/ holds helper\.cc, relu6\.cc, and its answers "
                                         "file names none of them, with its wrapper beside it, "
                                         "as the op's"):
        build.find_op(op)
    (op / ".opgen-answers.yml").unlink()  # nothing says which is the op's
    with pytest.raises(UsageError, match=r"csrc/ holds helper\.cc, relu6\.cc, and no "
                                         r"\.opgen-answers\.yml there says which is the op's"):
        build.find_op(op)
