"""Rendering: a spec through its kind's templates, into an in-memory :class:`Plan`.

Nothing here touches the output folder; :mod:`opgen.writer` applies a plan.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import jinja2

from . import kinds
from .errors import TemplateError
from .spec import Spec
from .template_files import COMMON, TEMPLATE_SUFFIX, template_sources, templates_root


@dataclass(frozen=True)
class Plan:
    """The files of one op, rendered: relative POSIX path -> bytes."""

    files: dict[str, bytes]

    def paths(self) -> list[str]:
        return sorted(self.files)


def _environment(root: Path) -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(root)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )


def render_op(spec: Spec, *, naive: bool = False) -> Plan:
    """Render every file of the op described by ``spec`` from its kind's template folder
    (``naive``: the benchmark's copy, whose kernels are the simplest correct ones)."""
    kind = kinds.get(spec.model.kind)
    root = templates_root()
    env = _environment(root)
    variables = kind.context(spec, naive)
    files: dict[str, bytes] = {}
    for folder in (COMMON, kind.templates):
        for rel, out_rel, data in _render_folder(env, root, folder, variables):
            if out_rel in files:
                raise TemplateError(f"template {folder}/{rel} renders to {out_rel}, which "
                                    f"{COMMON}/ renders too")
            files[out_rel] = data
    return Plan(files)


def _render_folder(env: jinja2.Environment, root: Path, folder: str,
                   variables: Mapping[str, object]) -> Iterator[tuple[str, str, bytes]]:
    """(template path, output path, bytes) for each file under ``templates/<folder>``."""
    for rel in template_sources(folder):
        source = root / folder / rel
        try:
            out_rel = env.from_string(rel).render(variables)
            if rel.endswith(TEMPLATE_SUFFIX):
                out_rel = out_rel[: -len(TEMPLATE_SUFFIX)]
                text = env.get_template(f"{folder}/{rel}").render(variables)
                data = _tidy(text).encode()
            else:
                data = source.read_bytes()  # copied verbatim: the shared runtime headers
        except jinja2.TemplateError as exc:
            raise TemplateError(f"template {folder}/{rel}: {exc}") from None
        _check_relative(out_rel, rel)
        yield rel, out_rel, data


def _tidy(text: str) -> str:
    """Strip trailing spaces and collapse runs of blank lines that template control flow leaves."""
    lines = [line.rstrip() for line in text.splitlines()]
    out: list[str] = []
    for line in lines:
        if line == "" and len(out) >= 2 and out[-1] == "" and out[-2] == "":
            continue
        out.append(line)
    while out and out[-1] == "":
        out.pop()
    return "\n".join(out) + "\n"


def _check_relative(path: str, template: str) -> None:
    p = PurePosixPath(path)
    if p.is_absolute() or ".." in p.parts or not path:
        raise TemplateError(f"template {template} renders to {path!r}, outside the op folder")
