"""Interrupted and concurrent writes (issue 5 §4, issue 10 §3).

``opgen generate`` killed at any point leaves every file of the op folder whole (old or new), and
the next run that takes the op's lock finishes or undoes the update from its journal: the folder
then holds either the old files or the new ones, never a mix. Two runs on one folder at once do
not interleave. Failures are injected in process (monkeypatch) and by a real SIGKILL of a
subprocess stopped at chosen points of the write: the subprocess is ``python -c CHILD``, where
CHILD wraps ``opgen.journal``'s ``_stage`` and ``_install`` (the production code has no test
hooks) and then runs ``opgen.cli.main``.
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

from opgen import api, journal, render, writer

#: Run in the subprocess. OPGEN_TEST_STOP_AT names the point where it stops and waits to be
#: killed ("write:3": before the third new file is staged; "install:2": before the second file
#: is renamed into place; "installed": after the last, before the backups and the journal are
#: removed; "never"); each point reached leaves a marker file in OPGEN_TEST_MARKS;
#: OPGEN_TEST_WRITE_DELAY slows every staged write down.
CHILD = r"""
import os, sys, time
from pathlib import Path

import opgen.journal as journal

stop_at = os.environ["OPGEN_TEST_STOP_AT"]
delay = float(os.environ.get("OPGEN_TEST_WRITE_DELAY", "0"))
marks = Path(os.environ["OPGEN_TEST_MARKS"])
counts = {"write": 0, "install": 0}


def reached(point):
    (marks / point.replace(":", "-")).touch()
    if point == stop_at:
        time.sleep(600)  # the test kills this process here


def counted(kind):
    counts[kind] += 1
    reached(f"{kind}:{counts[kind]}")


real_stage, real_install, real_finish = journal._stage, journal._install, journal._finish


def stage(dest, rel, data):
    counted("write")
    real_stage(dest, rel, data)
    time.sleep(delay)


def install(dest, step):
    counted("install")
    real_install(dest, step)


def finish(dest, entries):
    reached("installed")
    real_finish(dest, entries)


journal._stage, journal._install, journal._finish = stage, install, finish
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


def _leftovers(op: Path) -> list[str]:
    """What an update leaves while it runs: staged files, backups, the journal, and the staging
    folders of the old whole-folder swap beside the op."""
    inside = [p.relative_to(op).as_posix() for p in op.rglob("*")
              if p.name.endswith((journal.NEW, journal.OLD)) or p == op / journal.JOURNAL]
    beside = [p.name for p in op.parent.iterdir() if p.name.startswith(f".{op.name}.opgen-")]
    return sorted(inside + beside)


def _torn(now: dict[str, bytes], versions: dict) -> list[str]:
    """The op's files that are neither their old nor their new version (staging files aside)."""
    return [rel for rel, data in now.items() if not rel.endswith((journal.NEW, journal.OLD))
            and rel != journal.JOURNAL
            and data not in (versions["old"].get(rel), versions["new"].get(rel))]


def _next_writer(op: Path) -> None:
    """What the next opgen run on the op does first, once it holds the op's lock."""
    with writer.locked(op):
        pass


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


def _counts(versions: dict) -> dict[str, int]:
    """How many files the run from old to new stages and installs: counted by a run on a copy."""
    if "counts" not in versions:
        op = versions["op"]
        copy = op.with_name("op_count")
        shutil.copytree(op, copy)
        marks = op.with_name("marks_count")
        proc = _child(["generate", str(versions["new_spec"]), "--out", str(copy)], "never", marks)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        versions["counts"] = {kind: sum(1 for m in marks.iterdir()
                                        if m.name.startswith(f"{kind}-"))
                              for kind in ("write", "install")}
        shutil.rmtree(copy)
    return versions["counts"]


KILL_POINTS = ["write:1", "write:2", "write:half", "write:last", "install:1", "install:2",
               "install:half", "install:last", "installed"]


def _point(point: str, versions: dict) -> str:
    kind, _, which = point.partition(":")
    n = _counts(versions).get(kind, 0)
    return {"half": f"{kind}:{n // 2}", "last": f"{kind}:{n}"}.get(which, point)


def _finishes(point: str) -> bool:
    """Whether a run killed at ``point`` had staged every new file, so the update completes."""
    return point.startswith("install") or point == "installed"


def test_the_update_stages_and_installs_every_changed_file(versions):
    counts = _counts(versions)
    changed = {rel for rel in versions["new"] if versions["new"][rel] != versions["old"].get(rel)}
    assert counts["write"] == len(changed) > 4 and counts["install"] >= counts["write"]


@pytest.mark.parametrize("point", KILL_POINTS)
def test_sigkill_leaves_whole_files_and_the_next_run_old_or_new_never_a_mix(versions, tmp_path,
                                                                             point):
    point = _point(point, versions)
    _kill_at(versions, point, tmp_path / "marks")
    assert _torn(_files(versions["op"]), versions) == [], f"killed at {point}: a torn file"
    _next_writer(versions["op"])
    expected = versions["new"] if _finishes(point) else versions["old"]
    assert _files(versions["op"]) == expected, f"killed at {point}: the folder holds a mix"
    assert _leftovers(versions["op"]) == []


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


@pytest.mark.parametrize("point", ["write:1", "write:last", "install:1", "installed"])
def test_no_staged_file_backup_or_journal_outlives_the_next_run(versions, tmp_path, point):
    _kill_at(versions, _point(point, versions), tmp_path / "marks")
    assert _leftovers(versions["op"]) != []
    api.generate(versions["old_spec"], versions["op"])
    assert _files(versions["op"]) == versions["old"]
    assert _leftovers(versions["op"]) == []


@pytest.mark.parametrize("point", ["write:1", "write:last", "install:half", "installed"])
def test_build_outputs_survive_a_sigkill(versions, tmp_path, point):
    _kill_at(versions, _point(point, versions), tmp_path / "marks")
    assert (versions["op"] / "build" / "keep.txt").is_file()
    api.generate(versions["new_spec"], versions["op"])
    assert (versions["op"] / "build" / "keep.txt").is_file()


def test_pretend_and_check_refuse_an_interrupted_update(versions, tmp_path):
    """They read without the lock, so they would see a mix: they say how to finish it instead."""
    _kill_at(versions, _point("install:half", versions), tmp_path / "marks")
    for flag in ("--pretend", "--check"):
        result = subprocess.run([sys.executable, "-m", "opgen", "generate", flag,
                                 str(versions["new_spec"]), "--out", str(versions["op"])],
                                capture_output=True, text=True, cwd=ROOT, check=False)
        assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr
        assert "was interrupted" in result.stderr and "opgen generate" in result.stderr
    assert _leftovers(versions["op"]) != []  # they wrote nothing


def test_a_damaged_journal_is_one_error_line(versions, tmp_path):
    _kill_at(versions, _point("install:2", versions), tmp_path / "marks")
    (versions["op"] / journal.JOURNAL).write_text("{not json")
    result = subprocess.run([sys.executable, "-m", "opgen", "generate",
                             str(versions["new_spec"]), "--out", str(versions["op"])],
                            capture_output=True, text=True, cwd=ROOT, check=False)
    assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr
    assert "not an opgen journal" in result.stderr and "Traceback" not in result.stderr


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
    assert _leftovers(versions["op"]) == []


def test_a_failure_mid_render_of_a_new_op_leaves_no_folder(tmp_path, monkeypatch):
    old, _ = _specs(tmp_path)
    monkeypatch.setattr(render, "_tidy", _fail_on_call(3, render._tidy))
    with pytest.raises(OSError, match="injected"):
        api.generate(old, tmp_path / "fresh")
    assert not (tmp_path / "fresh").exists()


def _nth(call: str, total: int) -> int:
    return {"first": 1, "second": 2, "middle": total // 2, "last": total}[call]


@pytest.mark.parametrize("call", ["first", "middle", "last"])
def test_a_failure_mid_write_leaves_the_old_files(versions, monkeypatch, call):
    n = _nth(call, _counts(versions)["write"])
    monkeypatch.setattr(journal, "_stage", _fail_on_call(n, journal._stage))
    with pytest.raises(OSError, match="injected"):
        api.generate(versions["new_spec"], versions["op"])
    assert _files(versions["op"]) == versions["old"]
    assert (versions["op"] / "build" / "keep.txt").is_file()
    assert _leftovers(versions["op"]) == []


@pytest.mark.parametrize("call", ["first", "second", "middle", "last"])
def test_a_failure_mid_install_puts_the_old_files_back(versions, monkeypatch, call):
    """Some files are already renamed into place when one rename fails: all of them go back."""
    n = _nth(call, _counts(versions)["install"])
    monkeypatch.setattr(journal, "_install", _fail_on_call(n, journal._install))
    with pytest.raises(OSError, match="injected"):
        api.generate(versions["new_spec"], versions["op"])
    assert _files(versions["op"]) == versions["old"]
    assert (versions["op"] / "build" / "keep.txt").is_file()
    assert _leftovers(versions["op"]) == []


@pytest.mark.parametrize("call, ends", [(1, "new"), (2, "old")])
def test_a_failure_while_putting_files_back_is_finished_by_the_next_run(versions, monkeypatch,
                                                                       call, ends):
    """The undo fails before it changed anything (every new file is still at hand: the next run
    rolls forward) or after it dropped a staged file (the next run rolls back)."""
    n = _counts(versions)["install"] // 2
    monkeypatch.setattr(journal, "_install", _fail_on_call(n, journal._install))
    monkeypatch.setattr(journal, "_undo", _fail_on_call(call, journal._undo))
    with pytest.raises(OSError, match=f"injected failure on call {call}"):
        api.generate(versions["new_spec"], versions["op"])
    monkeypatch.undo()
    assert _torn(_files(versions["op"]), versions) == []
    _next_writer(versions["op"])
    assert _files(versions["op"]) == versions[ends]
    assert _leftovers(versions["op"]) == []


def test_a_failed_journal_write_leaves_the_old_files(versions, monkeypatch):
    monkeypatch.setattr(journal, "_fsync_dir", _fail_on_call(1, journal._fsync_dir))
    with pytest.raises(OSError, match="injected"):
        api.generate(versions["new_spec"], versions["op"])
    assert _files(versions["op"]) == versions["old"]
    assert _leftovers(versions["op"]) == []


def test_a_failed_first_write_of_a_new_op_leaves_no_folder(tmp_path, monkeypatch):
    old, _ = _specs(tmp_path)
    monkeypatch.setattr(journal, "_install", _fail_on_call(3, journal._install))
    with pytest.raises(OSError, match="injected"):
        api.generate(old, tmp_path / "fresh")
    assert not (tmp_path / "fresh").exists()


# ---- concurrent runs -----------------------------------------------------------------------------

@pytest.mark.parametrize("stagger", [0.0, 0.05, 0.2])
def test_two_concurrent_runs_do_not_interleave(versions, tmp_path, stagger):
    """Both runs write slowly and overlap: the folder ends as one complete render, both succeed,
    and no staged file, backup or journal is left."""
    procs = []
    for k, spec in enumerate((versions["new_spec"], versions["old_spec"])):
        procs.append(_child(["generate", str(spec), "--out", str(versions["op"])], "never",
                            tmp_path / f"marks{k}", delay=0.02))
        time.sleep(stagger)
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    assert _files(versions["op"]) in (versions["old"], versions["new"])
    assert _leftovers(versions["op"]) == []
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
    monkeypatch.setattr(journal, "_write", _fail_on_call(1, journal._write))
    api.generate(versions["old_spec"], versions["op"])  # identical: no write, no failure
    assert _files(versions["op"]) == versions["old"]


def test_child_helper_runs_a_plain_generate(versions, tmp_path):
    proc = _child(["generate", str(versions["new_spec"]), "--out", str(versions["op"])], "never",
                  tmp_path / "marks")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert _files(versions["op"]) == versions["new"]
    assert (tmp_path / "marks" / "install-1").exists()
    assert (tmp_path / "marks" / "installed").exists()

