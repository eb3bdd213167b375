"""The kinds of op opgen generates, each one module here and one template folder.

A kind turns a checked :class:`~opgen.spec.Spec` into the variables of its templates and names
the folder under ``templates/`` they live in; :mod:`opgen.render` renders that folder with them.
Kinds share :mod:`opgen.codegen` (escaping, wrapped calls, attrs) and the rest of opgen (spec
loading, expressions, writer, build, test helpers), never each other.

Adding a kind: ``opgen/kinds/<kind>.py`` defining ``KIND``, ``templates/<kind>/``, a starting spec
``templates/spec/<kind>.yaml.jinja`` for ``opgen new``, and its entry in :data:`KINDS` below.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import UsageError

if TYPE_CHECKING:
    from ..errors import SpecError
    from ..spec import OpSpec, Spec


@dataclass(frozen=True)
class Kind:
    """One kind of op: what the spec's ``kind:`` names, and how its files are rendered."""

    name: str                    # the spec's `kind:` value
    templates: str               # its folder under templates/, rendered into the op folder
    #: (spec, naive) -> the templates' variables; ``naive`` asks for the benchmark's comparison
    #: copy, whose kernels are the simplest correct ones
    context: Callable[[Spec, bool], Mapping[str, object]]
    #: (YAML data, its lines, path, check_builtins) -> the checked spec, for a kind whose spec
    #: has its own schema; None: the elementwise schema of :mod:`opgen.spec`
    load: Callable[..., Spec] | None = None
    #: (model, fail) -> None: the kind's own rules for the fields of opgen.spec's schema that not
    #: every kind honours (``amp:``, ``inplace:``), raising ``fail(key path, message)``; every kind
    #: checked by that schema (``load`` None) has them
    check: Callable[[OpSpec, Callable[..., SpecError]], None] | None = None
    #: Spec -> Spec: what the kind derives from its checked spec (the elementwise double backward)
    derive: Callable[[Spec], Spec] | None = None
    #: the files the user owns once written (``{name}``: the op's name), such as kernel bodies:
    #: merged on regeneration, and accepted as edited by ``opgen generate --check``
    user_files: tuple[str, ...] = ()

    def user_owned(self, name: str) -> frozenset[str]:
        """The op ``name``'s user-owned files, relative to its folder."""
        return frozenset(path.format(name=name) for path in self.user_files)

    @property
    def starting_spec(self) -> str:
        """The template of the spec ``opgen new`` writes, under templates/."""
        return f"spec/{self.name}.yaml.jinja"


def _registry() -> dict[str, Kind]:
    from .. import spec
    from . import custom, elementwise, rowwise

    found = {kind.name: kind for kind in (elementwise.KIND, rowwise.KIND, custom.KIND)}
    spec.SCHEMAS.update({name: kind.load for name, kind in found.items() if kind.load})
    spec.KIND_CHECKS.update({name: kind.check for name, kind in found.items() if kind.check})
    spec.KIND_DERIVATIONS.update({name: kind.derive for name, kind in found.items()
                                  if kind.derive})
    return found


KINDS: dict[str, Kind] = _registry()


def get(name: str) -> Kind:
    """The kind called ``name``; :class:`~opgen.errors.UsageError` naming those there are."""
    try:
        return KINDS[name]
    except KeyError:
        raise UsageError(f"unknown op kind '{name}'; available: {', '.join(KINDS)}") from None
