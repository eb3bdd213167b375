"""Packaging: what a fresh clone and a fresh ``pip install`` of opgen give a user."""

from __future__ import annotations

import os
import shutil
import subprocess

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
