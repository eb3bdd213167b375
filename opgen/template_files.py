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


#: The template folder every kind renders, besides its own.
COMMON = "common"
