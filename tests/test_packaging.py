"""Packaging: what a fresh clone and a fresh ``pip install`` of opgen give a user."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT


def test_a_fresh_clone_after_setup_shows_no_untracked_files(tmp_path):
    """scripts/setup.sh leaves .venv and .venv-gpu (folders, or symlinks to shared ones) and
    their logs in the clone: .gitignore must hide all of them."""
    git = shutil.which("git") or pytest.skip("no git")
    clone = tmp_path / "clone"
    clone.mkdir()
    shutil.copy(ROOT / ".gitignore", clone / ".gitignore")
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run([git, "init", "-q"], cwd=clone, check=True, env=env)
    (clone / ".venv").symlink_to(tmp_path)  # a shared environment, linked
    (clone / ".venv-gpu").mkdir()
    (clone / ".venv-gpu" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    for log in (".venv.log", ".venv-gpu.log"):
        (clone / log).write_text("pip output\n")
    status = subprocess.run([git, "status", "--porcelain", "--untracked-files=all"], cwd=clone,
                            capture_output=True, text=True, check=True, env=env).stdout
    assert status.splitlines() == ["?? .gitignore"]


def _source_copy(dest: Path) -> Path:
    """What `pip install <opgen>` reads, copied, so building the wheel writes nothing here."""
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, dest / name)
    for name in ("opgen", "templates"):
        shutil.copytree(ROOT / name, dest / name,
                        ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    return dest


def _in_venv(venv: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run a command of the virtualenv as its user would: no PYTHONPATH, no other venv."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", GLOG_minloglevel="3")
    return subprocess.run(list(args), cwd=cwd, env=env, capture_output=True, text=True,
                          check=False)


@pytest.mark.build
@pytest.mark.packaging
def test_opgen_test_and_bench_work_with_the_packages_own_dependencies(tmp_path):
    """`pip install opgen` (no extras) and Paddle in a new virtualenv: `opgen test` and
    `opgen bench` run; `--plot` without matplotlib is one line naming the extra."""
    source = tmp_path / "src"
    source.mkdir()
    _source_copy(source)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    install = _in_venv(venv, python, "-m", "pip", "install", "-q", "paddlepaddle==3.3.1",
                       str(source), cwd=tmp_path)
    assert install.returncode == 0, install.stdout[-2000:] + install.stderr[-2000:]
    found = _in_venv(venv, python, "-c", "import importlib.util as u; print([m for m in "
                     "('opgen', 'pytest', 'matplotlib', 'hypothesis') if u.find_spec(m)])",
                     cwd=tmp_path)
    assert found.stdout.strip() == "['opgen', 'pytest']", found.stdout + found.stderr

    assert _in_venv(venv, "opgen", "new", "t_op", "--elementwise", cwd=tmp_path).returncode == 0
    tested = _in_venv(venv, "opgen", "test", "t_op", "--device", "cpu", "--", "-q", "-x",
                      "-k", "float32", cwd=tmp_path)
    assert tested.returncode == 0, tested.stdout[-3000:] + tested.stderr[-3000:]
    assert " passed" in tested.stdout and "failed" not in tested.stdout
    benched = _in_venv(venv, "opgen", "bench", "t_op", "--sizes", "1024", "--repeats", "1",
                       "--dtype", "float32", "--json", "bench.json", cwd=tmp_path)
    assert benched.returncode == 0, benched.stdout[-3000:] + benched.stderr[-3000:]
    assert json.loads((tmp_path / "bench.json").read_text())["rows"]
    plotted = _in_venv(venv, "opgen", "bench", "t_op", "--plot", "bench.png", cwd=tmp_path)
    assert plotted.returncode == 2 and plotted.stderr.count("\n") == 1, plotted.stderr
    assert "pip install 'opgen[plot]'" in plotted.stderr
    assert not (tmp_path / "bench.png").exists()
