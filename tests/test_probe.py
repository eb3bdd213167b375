"""opgen.probe: the installed Paddle asked once, in one subprocess, and remembered."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

from opgen import doctor, names, probe, toolchain
from opgen.errors import ToolchainError
from opgen.probe import Answer, GpuRun, PaddleInfo

CPU_INFO = PaddleInfo(version="3.3.1", with_cuda=False, cuda_version=None, gpu_count=0,
                      gpu_arches=(), cxx11_abi=True, ops=frozenset({"relu6", "relu6_grad"}),
                      modules=frozenset({"paddle", "numpy", "setuptools", "typing_extensions"}))


@pytest.fixture
def probes(tmp_path, monkeypatch):
    """Count real probes (each answers CPU_INFO); the disk cache lives in a temp dir."""
    calls: list[int] = []
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(probe, "paddle_version", lambda: "3.3.1")
    monkeypatch.setattr(probe, "_fingerprint",
                        lambda version: f"{version}-{os.environ.get('CUDA_VISIBLE_DEVICES')}")

    def ask() -> Answer:
        calls.append(1)
        return Answer(CPU_INFO)

    monkeypatch.setattr(probe, "_probe", ask)
    probe.ask_paddle.cache_clear()
    yield calls
    probe.ask_paddle.cache_clear()


def test_one_subprocess_answers_names_build_and_doctor(tmp_path, monkeypatch):
    """The op registry, the build's arches and the doctor's facts: one Paddle subprocess."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(probe, "paddle_version", lambda: "3.3.1")
    monkeypatch.setattr(toolchain, "cuda_home", lambda: None)
    monkeypatch.setattr(doctor, "paddle_dir", lambda: None)
    monkeypatch.setattr(doctor, "nvidia_smi", lambda: None)
    real_run = subprocess.run
    pythons: list[list[str]] = []

    def run(argv, *args, **kwargs):
        if argv[0] != sys.executable:
            return real_run(argv, *args, **kwargs)
        pythons.append(argv)
        data = {**asdict(CPU_INFO), "ops": sorted(CPU_INFO.ops),
                "modules": sorted(CPU_INFO.modules)}
        return subprocess.CompletedProcess(argv, 0, stdout="OPGEN-PROBE" + json.dumps(data),
                                           stderr="")

    monkeypatch.setattr(subprocess, "run", run)
    probe.ask_paddle.cache_clear()
    try:
        assert names.paddle_builtin_ops() == CPU_INFO.ops
        toolchain.detect_arches()
        checks = {c.name: c for c in doctor.run_checks()}
        assert checks["Paddle"].status == "ok" and checks["Paddle CUDA"].status == "ok"
    finally:
        probe.ask_paddle.cache_clear()
    assert len(pythons) == 1, pythons


def test_the_probe_is_cached_on_disk(probes, tmp_path, monkeypatch):
    assert probe.paddle_info() == CPU_INFO
    probe.ask_paddle.cache_clear()  # a new process
    assert probe.paddle_info() == CPU_INFO
    assert len(probes) == 1
    (entry,) = (tmp_path / "cache" / "opgen").glob("paddle-*.json")
    assert sorted(json.loads(entry.read_text())["ops"]) == ["relu6", "relu6_grad"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")  # other GPUs: ask again
    probe.ask_paddle.cache_clear()
    probe.paddle_info()
    assert len(probes) == 2


def test_a_damaged_or_empty_cache_entry_is_asked_again(probes, tmp_path):
    probe.paddle_info()
    (entry,) = (tmp_path / "cache" / "opgen").glob("paddle-*.json")
    entry.write_text("{not json")
    probe.ask_paddle.cache_clear()
    assert probe.paddle_info() == CPU_INFO
    data = json.loads(entry.read_text())
    entry.write_text(json.dumps({**data, "ops": []}))  # an empty registry is no registry
    probe.ask_paddle.cache_clear()
    assert probe.paddle_info() == CPU_INFO
    del data["modules"]  # an older opgen's answer: no modules
    entry.write_text(json.dumps(data))
    probe.ask_paddle.cache_clear()
    assert probe.paddle_info() == CPU_INFO
    assert len(probes) == 4
    assert json.loads(entry.read_text())["ops"] and json.loads(entry.read_text())["modules"]


def test_a_failing_probe_is_an_error_and_not_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(probe, "paddle_version", lambda: "3.3.1")

    def failing_run(*args, **kwargs):
        return subprocess.CompletedProcess(args, 1, stdout="", stderr="Traceback...\nOSError: boom")

    monkeypatch.setattr(probe.subprocess, "run", failing_run)
    probe.ask_paddle.cache_clear()
    try:
        assert probe.paddle_info() is None
        with pytest.raises(ToolchainError, match="op registry .* OSError: boom"):
            names.paddle_builtin_ops()
    finally:
        probe.ask_paddle.cache_clear()
    assert not list(tmp_path.rglob("*.json"))


def test_an_unreadable_registry_alone_is_an_error(monkeypatch):
    info = PaddleInfo("3.3.1", False, None, 0, (), ops_error="AttributeError: no core")
    monkeypatch.setattr(probe, "paddle_version", lambda: "3.3.1")
    monkeypatch.setattr(probe, "ask_paddle", lambda: Answer(info))
    with pytest.raises(ToolchainError, match="AttributeError: no core"):
        names.paddle_builtin_ops()


def test_the_fingerprint_follows_the_install(monkeypatch):
    first = probe._fingerprint("3.3.1")
    if first is None:
        pytest.skip("Paddle is not installed")
    assert first == probe._fingerprint("3.3.1")
    assert probe._fingerprint("3.3.2") != first
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "7")
    assert probe._fingerprint("3.3.1") != first


_FAKE_PADDLE = """\
import types
__version__ = "9.9.9"
device = types.SimpleNamespace(is_compiled_with_cuda=lambda: False)
version = types.SimpleNamespace(cudnn=lambda: '8.6.0', cuda=lambda: None)
class _T:
    def __init__(self, v): self.v = v
    def __add__(self, o): return _T([0.0] * 4)
    def numpy(self): return types.SimpleNamespace(tolist=lambda: self.v)
def set_device(name): pass
def ones(shape, dtype=None): return _T([0.0] * shape[0])
"""


def test_the_probe_runs_paddle_in_a_subprocess(tmp_path: Path, monkeypatch) -> None:
    fake = tmp_path / "paddle"
    (fake / "base").mkdir(parents=True)
    (fake / "__init__.py").write_text(_FAKE_PADDLE)
    (fake / "base" / "__init__.py").write_text(
        "import types\n"
        "core = types.SimpleNamespace(get_all_op_names=lambda: ['relu6'],\n"
        "                             _get_all_register_op_kernels=lambda lib: {'exp': []})\n")
    (fake / "base" / "libpaddle.py").write_text("_GLIBCXX_USE_CXX11_ABI = False\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    answer = probe._probe()
    assert answer.info is not None
    # the fake paddle and what the probe itself imports, among the modules it loads
    assert {"paddle", "json", "sys"} <= answer.info.modules
    assert answer == Answer(PaddleInfo("9.9.9", False, None, 0, (), cudnn_version="8.6.0",
                                       cxx11_abi=False, ops=frozenset({"relu6", "exp"}),
                                       modules=answer.info.modules))
    assert probe.gpu_run() == GpuRun(((0.0,) * 4, (0.0,) * 4))
    (fake / "__init__.py").write_text("raise ImportError('broken')\n")
    assert probe._probe() == Answer(None, "ImportError: broken")
    assert probe.gpu_run() is None
