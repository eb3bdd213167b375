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
