"""Start-up of a generated op (issue 15): importing one and making its first call loads its
library and nothing of opgen's generator (the spec, the templates, pydantic, jinja2) and no build
system beyond what ``import paddle`` itself imports. Checked by the modules a fresh interpreter
holds, not by a time: docs/benchmarks.md "Start-up" has the times."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from opgen import build

ROOT = Path(__file__).resolve().parent.parent

#: What a generated op's import and first call must not import: the generator, and build systems.
HEAVY = ("opgen.api", "opgen.spec", "opgen.render", "opgen.kinds", "opgen.merge", "pydantic",
         "jinja2", "yaml", "setuptools", "distutils", "paddle.utils.cpp_extension")


def _new_modules(code: str) -> list[str]:
    """The modules that ``code`` imports after ``import paddle``, in a fresh interpreter."""
    script = ("import sys, json\nimport paddle\nbefore = set(sys.modules)\n" + code +
              "\nprint(json.dumps(sorted(set(sys.modules) - before)))")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GLOG_minloglevel": "3"}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if m.startswith(HEAVY)]


def test_the_build_module_a_wrapper_loads_through_imports_no_generator():
    # A wrapper beside its sources loads its library through opgen.build; `import opgen` used to
    # import the whole generator (a second of a first call).
    assert _heavy(_new_modules("import opgen.build")) == []


@pytest.mark.build
def test_importing_and_calling_a_built_op_imports_no_generator_or_build_system():
    op_dir = ROOT / "examples" / "relu6"
    build.compile_library(build.configure(op_dir, cpu_only=True))  # built, not loaded, here
    new = _new_modules(f"sys.path.insert(0, {str(op_dir)!r})\nimport relu6\n"
                       "relu6.relu6(paddle.to_tensor([-1.0, 3.0, 7.0]))")
    assert "relu6" in new and "opgen.build" in new  # the call did load the library
    assert _heavy(new) == []
