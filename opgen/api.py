"""The library API behind the CLI: new, generate, build, test, load.

Every function takes plain arguments and raises :class:`~opgen.errors.OpgenError` for anything
the user can fix; the CLI only parses flags and prints.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import yaml

from . import __version__, build
from .errors import DriftError, UsageError, WriteError
from .names import identifier_problem
from .render import Plan, render_op, templates_root
from .spec import Spec, load, loads
from .writer import ANSWERS_FILE, Change, Status, apply, compare, sha256


@dataclass(frozen=True)
class Result:
    """What a generate or new did (or, with ``pretend``, would do) to ``dest``."""

    dest: Path
    changes: list[Change]
    written: bool


def _answers(spec: Spec, spec_bytes: bytes, plan: Plan) -> bytes:
    """The record of what produced the op: read back by later regenerations and by reviewers."""
    data = {
        "_note": "Written by opgen: what generated this op. Do not edit.",
        "opgen_version": __version__,
        "template": "op",
        "spec": spec.path.name,
        "spec_sha256": sha256(spec_bytes),
        "files": {path: sha256(data) for path, data in sorted(plan.files.items())},
    }
    return yaml.safe_dump(data, sort_keys=False).encode()


def _plan_for(spec: Spec, spec_bytes: bytes, dest: Path) -> Plan:
    plan = render_op(spec)
    files = dict(plan.files)
    if spec.path.resolve().parent != dest.resolve():
        files[spec.path.name] = spec_bytes  # the op folder always carries its spec
    files[ANSWERS_FILE] = _answers(spec, spec_bytes, plan)
    return Plan(files)


def generate(spec_path: Path | str, out: Path | str | None = None, *, pretend: bool = False,
             check: bool = False) -> Result:
    """Render the op of ``spec_path`` into ``out`` (default: the spec's folder).

    ``check`` compares in memory and raises :class:`DriftError` listing the files that differ.
    """
    spec_path = Path(spec_path)
    spec = load(spec_path)
    dest = Path(out) if out is not None else spec_path.parent
    if dest.exists() and not dest.is_dir():
        raise UsageError(f"--out {dest}: exists and is not a folder")
    plan = _plan_for(spec, spec_path.read_bytes(), dest)
    if check:
        changes = compare(plan, dest)
        drift = [c for c in changes if c.status is not Status.IDENTICAL]
        if drift:
            listing = ", ".join(f"{c.path} ({'missing' if c.status is Status.CREATE else 'differs'})"
                                for c in drift)
            raise DriftError(f"{dest}: generated files differ from {spec_path.name}: {listing}")
        return Result(dest, changes, written=False)
    if pretend:
        return Result(dest, compare(plan, dest), written=False)
    return Result(dest, apply(plan, dest), written=True)


def new(name: str, *, kind: str = "elementwise", directory: Path | str | None = None,
        pretend: bool = False, force: bool = False) -> Result:
    """Scaffold ``<directory>/<name>/<name>.yaml`` and the op generated from it."""
    problem = identifier_problem(name, what="op")
    if problem:
        raise UsageError(problem)
    if kind != "elementwise":
        raise UsageError(f"unknown op kind '{kind}'; available: elementwise")
    dest = Path(directory or ".") / name
    if dest.exists() and not force:
        raise WriteError(f"{dest} already exists; use --force to regenerate into it")
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(templates_root())),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    text = env.get_template(f"spec/{kind}.yaml.jinja").render(name=name)
    spec_path = dest / f"{name}.yaml"
    spec = loads(text, spec_path)
    spec_bytes = text.encode()
    plan = _plan_for(spec, spec_bytes, dest)
    files = dict(plan.files)
    files[spec_path.name] = spec_bytes
    plan = Plan(files)
    if pretend:
        return Result(dest, compare(plan, dest), written=False)
    return Result(dest, apply(plan, dest), written=True)


def build_op(op_dir: Path | str, *, cpu_only: bool = False, arch: str | None = None,
             verbose: bool = False) -> build.BuildConfig:
    """Compile the op in ``op_dir`` (cached); return the configuration that was built."""
    op_dir = _op_dir(op_dir)
    config = build.configure(op_dir, cpu_only=cpu_only, arches=build.parse_arches(arch))
    build.compile_library(config, verbose=verbose)
    return config


def test(op_dir: Path | str, *, device: str = "all", pytest_args: list[str] | None = None) -> int:
    """Run the op's generated tests with pytest in a subprocess; return pytest's exit code."""
    op_dir = _op_dir(op_dir)
    if device not in ("cpu", "gpu", "all"):
        raise UsageError(f"--device: expected cpu, gpu or all, got '{device}'")
    name = build.find_op(op_dir)
    test_file = op_dir / f"test_{name}.py"
    if not test_file.exists():
        raise UsageError(f"{op_dir}: no test_{name}.py; run `opgen generate` first")
    env = {**os.environ, "OPGEN_TEST_DEVICES": device, "GLOG_minloglevel": "2"}
    cmd = [sys.executable, "-m", "pytest", str(test_file), "-p", "no:cacheprovider",
           *(pytest_args or [])]
    return subprocess.call(cmd, env=env, cwd=op_dir)


def load_op(op_dir: Path | str, *, cpu_only: bool = False, arch: str | None = None,
            verbose: bool = False) -> ModuleType:
    """Build the op if needed and return its Python wrapper module (attribute ``<name>``)."""
    op_dir = _op_dir(op_dir)
    name = build.find_op(op_dir)
    library = build.load_library(op_dir, cpu_only=cpu_only, arches=build.parse_arches(arch),
                                 verbose=verbose)
    module_name = f"opgen_ops.{name}"
    if module_name in sys.modules:
        module = sys.modules[module_name]
    else:
        spec = importlib.util.spec_from_file_location(module_name, op_dir / f"{name}.py")
        if spec is None or spec.loader is None:
            raise UsageError(f"{op_dir}: no {name}.py wrapper; run `opgen generate` first")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    module._library = library  # type: ignore[attr-defined]
    return module


def _op_dir(op_dir: Path | str) -> Path:
    path = Path(op_dir)
    if not path.is_dir():
        raise UsageError(f"{path}: no such op folder")
    return path.resolve()
