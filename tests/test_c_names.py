"""Op names that the generated C++ cannot use (issue 10 §6b): the names <cmath>, paddle/extension.h
and CUDA's headers declare at global scope, and the headers they include by a bare name.

The list (opgen/c_names.txt) is data: every entry is refused with a free alternative, and, where a
compiler and the headers are here, the list is exactly what compiling against them finds.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import sys
from pathlib import Path

import pytest

from opgen import names, probe

ROOT = Path(__file__).resolve().parent.parent
GPP = shutil.which("g++")


def _script():
    spec = importlib.util.spec_from_file_location("c_names_script", ROOT / "scripts" / "c_names.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


SCRIPT = _script()
SECTIONS = SCRIPT.read()


def _listed(kind: str, group: str) -> set[str]:
    return set(SECTIONS.get((kind, group), []))


def test_the_math_names_of_the_issue_are_listed():
    for name in ("sincos", "lgamma", "remainder", "y0", "frexp", "j0", "j1", "jn", "y1", "yn",
                 "exp10", "gamma", "drem", "significand", "scalb"):
        assert names.c_names().get(name) == ("namespace", "<cmath>"), name
    assert names.c_names()["normcdf"] == ("namespace", "CUDA")
    assert names.c_names()["features"] == ("header", "<cmath>")


def test_every_listed_name_is_refused_with_a_free_alternative():
    unrefused, taken = [], []
    for name in sorted(names.c_names()):
        problem = names.identifier_problem(name, what="op")
        if problem is None:
            unrefused.append(name)
            continue
        suggested = re.search(r"; use '(\w+)'$", problem)
        if suggested is not None and names.identifier_problem(suggested.group(1), what="op"):
            taken.append(suggested.group(1))  # other rules (a keyword, a macro) may come first
    assert (unrefused, taken) == ([], [])


def test_the_refusal_names_the_header():
    assert names.identifier_problem("sincos", what="op") == (
        "op name 'sincos' is declared at global scope by <cmath>, so the generated "
        "`namespace sincos` would not compile; use 'sincos_op'")
    assert names.identifier_problem("stdlib", what="op") == (
        "op name 'stdlib' would name csrc/stdlib.h, which would replace the system header "
        "<stdlib.h> that paddle/extension.h includes; use 'stdlib_op'")


def test_inputs_may_take_these_names():
    """Only the op's namespace and header clash: a parameter may shadow a C function."""
    assert names.identifier_problem("sincos", what="input") is None
    assert names.identifier_problem("features", what="attr") is None


def _probe(group: str) -> tuple[set[str], set[str]]:
    includes, command = SCRIPT.GROUPS[group]
    flags = SCRIPT.paddle_flags() if group == "paddle/extension.h" else []
    clashes = SCRIPT.namespace_clashes(includes, command, flags, SCRIPT.cpp_keywords())
    return set(clashes), set(SCRIPT.shadowed_headers(includes, command, flags))


@pytest.mark.skipif(GPP is None, reason="needs g++")
def test_the_cmath_list_is_what_gpp_finds():
    """Both ways: every listed name fails to compile as a namespace, and no other name does."""
    clashes, headers = _probe("<cmath>")
    assert clashes == _listed("namespace", "<cmath>")
    assert headers == _listed("header", "<cmath>")


@pytest.mark.skipif(GPP is None or probe.paddle_version() is None,
                    reason="needs g++ and Paddle's headers")
def test_the_paddle_extension_list_is_what_gpp_finds():
    clashes, headers = _probe("paddle/extension.h")
    assert clashes - _listed("namespace", "<cmath>") == _listed("namespace", "paddle/extension.h")
    assert headers - _listed("header", "<cmath>") == _listed("header", "paddle/extension.h")
