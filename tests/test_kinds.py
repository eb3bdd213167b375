"""The registry of op kinds: each kind names its template folder and builds its variables."""

from __future__ import annotations

import typing

import pytest

from opgen import api, kinds
from opgen.errors import UsageError
from opgen.render import templates_root
from opgen.spec import OpSpec


def test_the_spec_accepts_exactly_the_registered_kinds():
    """The elementwise schema lists the kinds that use it; a kind with a schema of its own
    (``load``) is routed to it before that schema is read."""
    shared = {name for name, kind in kinds.KINDS.items() if kind.load is None}
    assert set(typing.get_args(OpSpec.model_fields["kind"].annotation)) == shared
    assert "custom" in kinds.KINDS and kinds.KINDS["custom"].load is not None


def test_each_kind_of_the_shared_schema_has_its_own_rules():
    """amp: and inplace: are checked by each kind's module (its ``check``: the elementwise kind
    makes them, the rowwise kind refuses them), registered with opgen.spec; and so is what a
    kind derives from its spec (the elementwise double backward)."""
    from opgen import spec

    for name, kind in kinds.KINDS.items():
        if kind.load is None:
            assert kind.check is not None and spec.KIND_CHECKS[name] is kind.check, name
    derivations = {name: kind.derive for name, kind in kinds.KINDS.items() if kind.derive}
    assert derivations == spec.KIND_DERIVATIONS
    assert derivations == {"elementwise": kinds.elementwise.with_double_backward}


def test_opgen_spec_alone_applies_each_kinds_rules():
    """opgen.spec imported on its own (not through opgen.api) still loads every kind's specs with
    that kind's rules: the first load registers opgen.kinds."""
    import os
    import subprocess
    import sys

    from conftest import ROOT

    code = ("import sys\n"
            "from opgen.spec import load, loads\n"
            "from opgen.errors import SpecError\n"
            "assert 'opgen.kinds' not in sys.modules\n"
            "print(load('examples/embedding/embedding.yaml').model.name)\n"
            "try:\n"
            "    loads('name: sq\\nkind: rowwise\\ninputs: [x]\\noutputs: [out]\\n"
            "inplace: {x: out}\\nforward:\\n  out: x * x\\n', check_builtins=False)\n"
            "except SpecError as exc:\n"
            "    print(exc)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("embedding\n")
    assert "inplace: a kind: rowwise op has no in-place variant" in proc.stdout


@pytest.mark.parametrize("kind", sorted(kinds.KINDS))
def test_each_kind_has_its_templates_and_starting_spec(kind):
    found = kinds.get(kind)
    assert found.name == kind
    assert (templates_root() / found.templates).is_dir()
    assert (templates_root() / found.starting_spec).is_file()


def test_an_unknown_kind_names_the_known_ones(tmp_path):
    with pytest.raises(UsageError, match="unknown op kind 'scan'; available: elementwise, "
                                         "rowwise, custom"):
        api.new("my_op", kind="scan", directory=tmp_path)
    assert not list(tmp_path.iterdir())
