"""Interrupted and concurrent writes (issue 5 §4).

``opgen generate`` killed at any point leaves the op folder holding either the old files or the new
ones, never a mix; two runs on one folder at once do not interleave. Failures are injected in
process (monkeypatch) and by a real SIGKILL of a subprocess stopped at chosen points of the write:
the subprocess is ``python -c CHILD``, where CHILD wraps ``opgen.writer``'s ``_write`` and
``_exchange`` (the production code has no test hooks) and then runs ``opgen.cli.main``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import RELU6, ROOT

from opgen import api, render, writer

#: Run in the subprocess. OPGEN_TEST_STOP_AT names the point where it stops and waits to be
#: killed ("write:3": before the third file is written; "exchange": before the folders trade
#: places; "swapped": after, before the old files are removed; "never"); each point reached leaves
#: a marker file in OPGEN_TEST_MARKS; OPGEN_TEST_WRITE_DELAY slows every write down.
CHILD = r"""
import os, sys, time
from pathlib import Path

import opgen.writer as writer

stop_at = os.environ["OPGEN_TEST_STOP_AT"]
delay = float(os.environ.get("OPGEN_TEST_WRITE_DELAY", "0"))
marks = Path(os.environ["OPGEN_TEST_MARKS"])
writes = 0


def reached(point):
    (marks / point.replace(":", "-")).touch()
    if point == stop_at:
        time.sleep(600)  # the test kills this process here


real_write, real_exchange = writer._write, writer._exchange


def write(path, data):
    global writes
    writes += 1
    reached(f"write:{writes}")
    real_write(path, data)
    time.sleep(delay)


def exchange(a, b):
    reached("exchange")
    swapped = real_exchange(a, b)
    reached("swapped")
    return swapped


writer._write, writer._exchange = write, exchange
from opgen.cli import main

main(sys.argv[1:])
"""


def _specs(tmp_path: Path) -> tuple[Path, Path]:
    """Two versions of relu6's spec, in two folders: the old one and the new one."""
    old, new = tmp_path / "specs" / "old" / "relu6.yaml", tmp_path / "specs" / "new" / "relu6.yaml"
    for path, default in ((old, "6.0"), (new, "5.0")):
        path.parent.mkdir(parents=True)
        text = (RELU6 / "relu6.yaml").read_text()
        path.write_text(text.replace("default: 6.0", f"default: {default}").replace(
            "ReLU6, min(max(x, 0), threshold)", f"ReLU6 (version {default})"))
    return old, new


def _files(root: Path) -> dict[str, bytes]:
    """The op's generated files: everything but build outputs and caches."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.relative_to(root).parts[0] not in ("build", "__pycache__")}


def _staging(parent: Path, name: str = "op") -> list[str]:
    """Staging folders of the op folder ``name`` (its lock file is not one)."""
    return sorted(p.name for p in parent.iterdir() if p.name.startswith(f".{name}.opgen-")
                  and p.is_dir())


@pytest.fixture
def versions(tmp_path):
    """An op folder generated from the old spec, and what old and new renders hold."""
    old, new = _specs(tmp_path)
    reference = tmp_path / "reference_new"
    api.generate(new, reference)
    op = tmp_path / "op"
    api.generate(old, op)
    (op / "build").mkdir()
    (op / "build" / "keep.txt").write_text("a build output that must survive")
    return {"op": op, "old_spec": old, "new_spec": new, "old": _files(op),
            "new": _files(reference)}


def _child(args: list[str], stop_at: str, marks: Path, delay: float = 0.0) -> subprocess.Popen:
    marks.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OPGEN_TEST_STOP_AT": stop_at, "OPGEN_TEST_MARKS": str(marks),
           "OPGEN_TEST_WRITE_DELAY": str(delay), "GLOG_minloglevel": "3"}
    return subprocess.Popen([sys.executable, "-c", CHILD, *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for(marker: Path, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not marker.exists():
        if proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"child exited ({proc.returncode}) before {marker.name}: {err}")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"child never reached {marker.name}")
        time.sleep(0.01)


def _kill_at(versions: dict, point: str, marks: Path) -> None:
    proc = _child(["generate", str(versions["new_spec"]), "--out", str(versions["op"])], point,
                  marks)
    _wait_for(marks / point.replace(":", "-"), proc)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()
    assert proc.returncode == -signal.SIGKILL


def _file_count(versions: dict) -> int:
    """How many files the run from old to new writes: counted by a run on a copy."""
    if "writes" not in versions:
        op = versions["op"]
        copy = op.with_name("op_count")
        shutil.copytree(op, copy)
        marks = op.with_name("marks_count")
        proc = _child(["generate", str(versions["new_spec"]), "--out", str(copy)], "never", marks)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        versions["writes"] = sum(1 for m in marks.iterdir() if m.name.startswith("write-"))
        shutil.rmtree(copy)
    return versions["writes"]


KILL_POINTS = ["write:1", "write:2", "write:half", "write:last", "exchange", "swapped"]


def _point(point: str, versions: dict) -> str:
    n = _file_count(versions)
    return {"write:half": f"write:{n // 2}", "write:last": f"write:{n}"}.get(point, point)


@pytest.mark.parametrize("point", KILL_POINTS)
def test_sigkill_leaves_old_or_new_files_never_a_mix(versions, tmp_path, point):
    point = _point(point, versions)
    _kill_at(versions, point, tmp_path / "marks")
    now = _files(versions["op"])
    expected = versions["new"] if point == "swapped" else versions["old"]
    assert now == expected, f"killed at {point}: the folder holds a mix"


@pytest.mark.parametrize("point", KILL_POINTS)
def test_generate_after_a_sigkill_completes_the_new_op(versions, tmp_path, point):
    """The lock of the killed run dies with it, and the next run writes the whole new op."""
    _kill_at(versions, _point(point, versions), tmp_path / "marks")
    start = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "opgen", "generate",
                             str(versions["new_spec"]), "--out", str(versions["op"])],
                            capture_output=True, text=True, cwd=ROOT, check=False)
    assert result.returncode == 0, result.stderr
    assert time.monotonic() - start < 30  # not waiting on a dead process's lock
    assert _files(versions["op"]) == versions["new"]


@pytest.mark.parametrize("point", ["write:1", "write:last", "exchange", "swapped"])
def test_no_staging_folder_outlives_the_next_run(versions, tmp_path, point):
    _kill_at(versions, _point(point, versions), tmp_path / "marks")
    api.generate(versions["new_spec"], versions["op"])
    assert _staging(versions["op"].parent) == []


@pytest.mark.parametrize("point", ["write:1", "write:last", "swapped"])
def test_build_outputs_survive_a_sigkill(versions, tmp_path, point):
    _kill_at(versions, _point(point, versions), tmp_path / "marks")
    assert (versions["op"] / "build" / "keep.txt").is_file()


def test_build_outputs_survive_a_sigkill_just_before_the_exchange(versions, tmp_path):
    _kill_at(versions, "exchange", tmp_path / "marks")
    api.generate(versions["new_spec"], versions["op"])
    assert (versions["op"] / "build" / "keep.txt").is_file()


# ---- failures injected in process ----------------------------------------------------------------

def _fail_on_call(n: int, real):
    calls = {"n": 0}

    def failing(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == n:
            raise OSError(f"injected failure on call {n}")
        return real(*args, **kwargs)

    return failing


@pytest.mark.parametrize("call", [1, 2, 5])
def test_a_failure_mid_render_writes_nothing(versions, monkeypatch, call):
    """render_op fails on its n-th template: no file of the op folder changes."""
    monkeypatch.setattr(render, "_tidy", _fail_on_call(call, render._tidy))
    with pytest.raises(OSError, match="injected"):
        api.generate(versions["new_spec"], versions["op"])
    assert _files(versions["op"]) == versions["old"]
    assert _staging(versions["op"].parent) == []


def test_a_failure_mid_render_of_a_new_op_leaves_no_folder(tmp_path, monkeypatch):
    old, _ = _specs(tmp_path)
    monkeypatch.setattr(render, "_tidy", _fail_on_call(3, render._tidy))
    with pytest.raises(OSError, match="injected"):
        api.generate(old, tmp_path / "fresh")
    assert not (tmp_path / "fresh").exists()


@pytest.mark.parametrize("call", ["first", "middle", "last"])
def test_a_failure_mid_write_leaves_the_old_files(versions, monkeypatch, call):
    n = {"first": 1, "middle": _file_count(versions) // 2, "last": _file_count(versions)}[call]
    monkeypatch.setattr(writer, "_write", _fail_on_call(n, writer._write))
    with pytest.raises(OSError, match="injected"):
        api.generate(versions["new_spec"], versions["op"])
    assert _files(versions["op"]) == versions["old"]
    assert (versions["op"] / "build" / "keep.txt").is_file()
    assert _staging(versions["op"].parent) == []


def test_a_failed_exchange_leaves_the_old_files(versions, monkeypatch):
    def failing_exchange(a, b):
        raise OSError("injected failure of renameat2")

    monkeypatch.setattr(writer, "_exchange", failing_exchange)
    with pytest.raises(OSError, match="injected"):
        api.generate(versions["new_spec"], versions["op"])
    assert _files(versions["op"]) == versions["old"]
    assert _staging(versions["op"].parent) == []


def test_a_failed_exchange_keeps_the_build_outputs(versions, monkeypatch):
    def failing_exchange(a, b):
        raise OSError("injected failure of renameat2")

    monkeypatch.setattr(writer, "_exchange", failing_exchange)
    with pytest.raises(OSError, match="injected"):
        api.generate(versions["new_spec"], versions["op"])
    assert (versions["op"] / "build" / "keep.txt").is_file()


# ---- concurrent runs -----------------------------------------------------------------------------

@pytest.mark.parametrize("stagger", [0.0, 0.05, 0.2])
def test_two_concurrent_runs_do_not_interleave(versions, tmp_path, stagger):
    """Both runs write slowly and overlap: the folder ends as one complete render, both succeed,
    and no staging folder is left."""
    procs = []
    for k, spec in enumerate((versions["new_spec"], versions["old_spec"])):
        procs.append(_child(["generate", str(spec), "--out", str(versions["op"])], "never",
                            tmp_path / f"marks{k}", delay=0.02))
        time.sleep(stagger)
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    assert _files(versions["op"]) in (versions["old"], versions["new"])
    assert _staging(versions["op"].parent) == []
    assert (versions["op"] / "build" / "keep.txt").is_file()


def test_a_second_run_waits_for_the_first(versions, tmp_path):
    """While one run is stopped mid-write holding the lock, another waits instead of writing."""
    first = _child(["generate", str(versions["new_spec"]), "--out", str(versions["op"])],
                   "write:2", tmp_path / "marks1")
    _wait_for(tmp_path / "marks1" / "write-2", first)
    second = _child(["generate", str(versions["old_spec"]), "--out", str(versions["op"])],
                    "never", tmp_path / "marks2")
    time.sleep(1.0)
    assert second.poll() is None, "the second run did not wait for the lock"
    assert not list((tmp_path / "marks2").iterdir()), "the second run wrote while locked out"
    os.kill(first.pid, signal.SIGKILL)
    first.communicate()
    out, err = second.communicate(timeout=60)
    assert second.returncode == 0, err
    assert _files(versions["op"]) == versions["old"]


def test_an_identical_regeneration_writes_nothing(versions, monkeypatch):
    monkeypatch.setattr(writer, "_write", _fail_on_call(1, writer._write))
    api.generate(versions["old_spec"], versions["op"])  # identical: no write, no failure
    assert _files(versions["op"]) == versions["old"]


def test_child_helper_runs_a_plain_generate(versions, tmp_path):
    proc = _child(["generate", str(versions["new_spec"]), "--out", str(versions["op"])], "never",
                  tmp_path / "marks")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert _files(versions["op"]) == versions["new"]
    assert (tmp_path / "marks" / "exchange").exists() and (tmp_path / "marks" / "swapped").exists()

