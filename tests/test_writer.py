"""The op folder is updated in place, file by file (issue 10 §3).

A shell, editor terminal or notebook sitting in the op folder keeps working across a regenerate:
the folder (its inode) stays, each file is replaced by a rename, and files that are not opgen's
are left alone. An op folder reached through a symbolic link is updated where the link points.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import RELU6, ROOT, run_opgen, tree_snapshot

from opgen import api

#: Waits for a line on stdin, then prints what it sees from its working directory: the sorted
#: listing, then the wrapper's text. It starts in the op folder before the regenerate.
READER = r"""
import os, sys
sys.stdin.readline()
print(sorted(os.listdir(".")))
print(open("relu6.py").read())
"""


def _op(tmp_path: Path) -> Path:
    """A copy of the checked-in relu6 example, with a file of the user's beside it."""
    op = tmp_path / "relu6"
    shutil.copytree(RELU6, op, ignore=shutil.ignore_patterns("build"))
    (op / "notes.md").write_text("my notes\n")
    return op


def _add_slope(spec: Path) -> None:
    text = spec.read_text()
    spec.write_text(text.replace("  threshold: {type: float, default: 6.0}",
                                 "  threshold: {type: float, default: 6.0}\n"
                                 "  slope: {type: float, default: 1.0}"))


def test_a_process_in_the_op_folder_reads_the_new_files(tmp_path):
    """`cd relu6 && opgen generate relu6.yaml`, with another process sitting in relu6/."""
    op = _op(tmp_path)
    inode = op.stat().st_ino
    env = {**os.environ, "GLOG_minloglevel": "3",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    reader = subprocess.Popen([sys.executable, "-c", READER], cwd=op, env=env, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    _add_slope(op / "relu6.yaml")

    result = subprocess.run([sys.executable, "-m", "opgen", "generate", "relu6.yaml"], cwd=op,
                            env=env, capture_output=True, text=True, check=False)

    out, err = reader.communicate("go\n", timeout=60)
    assert result.returncode == 0, result.stderr
    assert reader.returncode == 0, err
    listing, wrapper = out.split("\n", 1)
    assert listing == repr(sorted(os.listdir(op)))
    assert "notes.md" in listing and "relu6.yaml" in listing
    assert "slope: float = 1.0" in wrapper  # the new render, read from the old working directory
    assert op.stat().st_ino == inode


def test_the_op_folder_and_its_subfolders_keep_their_inodes(tmp_path):
    op = _op(tmp_path)
    folders = {p: p.stat().st_ino for p in (op, op / "csrc", op / ".opgen")}
    _add_slope(op / "relu6.yaml")
    api.generate(op / "relu6.yaml")
    assert "slope" in (op / "relu6.py").read_text()
    assert {p: p.stat().st_ino for p in folders} == folders


def test_an_op_folder_behind_a_symlink_is_updated_where_it_points(tmp_path):
    real = _op(tmp_path)
    link = tmp_path / "current"
    link.symlink_to(real.name)
    inode = real.stat().st_ino
    _add_slope(real / "relu6.yaml")

    api.generate(link / "relu6.yaml", link)

    assert link.is_symlink() and os.readlink(link) == real.name
    assert "slope: float = 1.0" in (real / "relu6.py").read_text()
    assert real.stat().st_ino == inode
    assert sorted(p.name for p in tmp_path.iterdir()) == [".relu6.opgen.lock", "current", "relu6"]


def test_files_that_are_not_opgens_are_left_alone(tmp_path):
    op = _op(tmp_path)
    (op / "csrc" / "extra.cc").write_text("// mine\n")
    (op / "build").mkdir()
    (op / "build" / "lib.so").write_bytes(b"built")
    (op / "data").symlink_to(tmp_path)
    mine = {p: p.read_bytes() for p in (op / "notes.md", op / "csrc" / "extra.cc",
                                        op / "build" / "lib.so")}
    _add_slope(op / "relu6.yaml")
    spec = op / "relu6.yaml"
    text = spec.read_text()
    spec.write_text(text.replace("name: relu6 ", "name: clip6 ").replace(
        "op_name: custom_relu6", "op_name: custom_clip6"))

    api.generate(spec)  # renames the op: relu6's files go, clip6's come

    assert {p: p.read_bytes() for p in mine} == mine
    assert (op / "data").is_symlink()
    assert not (op / "csrc" / "relu6.h").exists() and (op / "csrc" / "clip6.h").is_file()
    assert tree_snapshot(op / "build") == {"lib.so": b"built"}


def test_a_folder_where_a_file_goes_is_one_error_line(tmp_path):
    op = _op(tmp_path)
    spec = op / "relu6.yaml"
    spec.write_text(spec.read_text().replace("name: relu6 ", "name: clip6 ").replace(
        "op_name: custom_relu6", "op_name: custom_clip6"))
    (op / "csrc" / "clip6.h").mkdir()
    before = tree_snapshot(op)

    result = run_opgen("generate", str(spec))

    assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr
    assert "clip6.h: is a folder, where opgen writes a file" in result.stderr
    assert tree_snapshot(op) == before and (op / "csrc" / "clip6.h").is_dir()
