"""Packaging: what a fresh clone and a fresh ``pip install`` of opgen give a user."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
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


def _in_venv(venv: Path, *args: str, cwd: Path,
             env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run a command of the virtualenv as its user would: no PYTHONPATH, no other venv."""
    full = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    full.update(PATH=f"{venv / 'bin'}{os.pathsep}{full.get('PATH', '')}", GLOG_minloglevel="3",
                **(env or {}))
    return subprocess.run(list(args), cwd=cwd, env=full, capture_output=True, text=True,
                          check=False)


def _shown(result: subprocess.CompletedProcess[str]) -> str:
    return result.stdout[-3000:] + result.stderr[-3000:]


def _new_venv(tmp_path: Path) -> Path:
    """A virtualenv with Paddle and `pip install <opgen>`: no extras, nothing else."""
    source = tmp_path / "src"
    source.mkdir()
    _source_copy(source)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    install = _in_venv(venv, "python", "-m", "pip", "install", "-q", "paddlepaddle==3.3.1",
                       str(source), cwd=tmp_path)
    assert install.returncode == 0, _shown(install)
    found = _in_venv(venv, "python", "-c", "import importlib.util as u; print([m for m in "
                     "('opgen', 'pytest', 'matplotlib', 'hypothesis') if u.find_spec(m)])",
                     cwd=tmp_path)
    assert found.stdout.strip() == "['opgen', 'pytest']", _shown(found)
    return venv


def _check_test_and_bench(venv: Path, work: Path) -> None:
    """`opgen test` and `opgen bench` on a new op; `--plot` needs the plot extra."""
    assert _in_venv(venv, "opgen", "new", "t_op", "--elementwise", cwd=work).returncode == 0
    tested = _in_venv(venv, "opgen", "test", "t_op", "--device", "cpu", "--", "-q", "-x",
                      "-k", "float32", cwd=work)
    assert tested.returncode == 0, _shown(tested)
    assert " passed" in tested.stdout and " failed" not in tested.stdout
    benched = _in_venv(venv, "opgen", "bench", "t_op", "--sizes", "1024", "--repeats", "1",
                       "--dtype", "float32", "--json", "bench.json", cwd=work)
    assert benched.returncode == 0, _shown(benched)
    assert json.loads((work / "bench.json").read_text())["rows"]
    plotted = _in_venv(venv, "opgen", "bench", "t_op", "--plot", "bench.png", cwd=work)
    assert plotted.returncode == 2 and plotted.stderr.count("\n") == 1, plotted.stderr
    assert "pip install 'opgen[plot]'" in plotted.stderr
    assert not (work / "bench.png").exists()


_GIT_ENV = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_AUTHOR_NAME": "Test", "GIT_AUTHOR_EMAIL": "test@example.com",
            "GIT_COMMITTER_NAME": "Test", "GIT_COMMITTER_EMAIL": "test@example.com"}


def _check_team_ci(venv: Path, work: Path) -> None:
    """`opgen init` with the installed opgen, committed and cloned; in the clone, the steps of
    the workflow's `ops` job (pip install -e ".[cpu]", opgen doctor, bash ci/run.sh)."""
    env = {**_GIT_ENV, "OPGEN_TEMPLATE_STORE": str(work / "store")}
    made = _in_venv(venv, "opgen", "init", "acme", cwd=work, env=env)
    assert made.returncode == 0, _shown(made)
    source = (work / "src").resolve().as_uri()
    assert f'"opgen @ {source}"' in (work / "acme" / "pyproject.toml").read_text()
    for command in (["git", "add", "-A"], ["git", "commit", "-q", "-m", "init"]):
        assert _in_venv(venv, *command, cwd=work / "acme", env=env).returncode == 0
    assert _in_venv(venv, "git", "clone", "-q", "acme", "clone", cwd=work, env=env).returncode == 0
    workflow = yaml.safe_load((work / "clone" / ".github" / "workflows" / "ci.yml").read_text())
    steps = [s for s in workflow["jobs"]["ops"]["steps"] if "run" in s]
    assert [s["run"] for s in steps] == ['pip install -e ".[cpu]"', "opgen doctor",
                                         "bash ci/run.sh"]
    for step in steps:
        ran = _in_venv(venv, "bash", "-c", step["run"], cwd=work / "clone",
                       env={**env, **step.get("env", {})})
        assert ran.returncode == 0, f"{step['run']}:\n{_shown(ran)}"
    assert "ci: 1 passed (relu6), 0 failed" in ran.stdout


@pytest.mark.build
@pytest.mark.packaging
def test_opgen_and_a_team_repository_work_with_the_packages_own_dependencies(tmp_path):
    """In a new virtualenv with Paddle and `pip install <opgen>` (no extras): `opgen test` and
    `opgen bench` run, `--plot` without matplotlib is one line naming the extra, and a team
    repository made by `opgen init` installs and passes its CI from a fresh clone."""
    venv = _new_venv(tmp_path)
    _check_test_and_bench(venv, tmp_path)
    _check_team_ci(venv, tmp_path)
