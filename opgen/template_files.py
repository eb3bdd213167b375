"""Where opgen's templates are and how their files are named: shared by the renderer and the
spec's check of op names (a leaf module: it imports nothing of opgen but its errors)."""

from __future__ import annotations

from pathlib import Path

from .errors import TemplateError

TEMPLATE_SUFFIX = ".jinja"


def templates_root() -> Path:
    """The ``templates/`` folder: beside the package in a checkout, inside it when installed."""
    here = Path(__file__).resolve().parent
    for candidate in (here.parent / "templates", here / "templates"):
        if (candidate / "spec").is_dir():
            return candidate
    raise TemplateError(f"opgen's templates are missing (looked beside {here})")


def template_sources(folder: str) -> list[str]:
    """The files under ``templates/<folder>``, as paths relative to it (POSIX), sorted; no
    ``__pycache__``."""
    base = templates_root() / folder
    return [rel for rel in sorted(p.relative_to(base).as_posix() for p in base.rglob("*")
                                  if p.is_file()) if "__pycache__" not in rel]


#: The folder under templates/ rendered into every op, whatever its kind, besides its own: the
#: runtime headers every kind uses (math, errors, threads, CUDA helpers, Paddle glue).
COMMON = "common"
