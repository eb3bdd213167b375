"""The one error hierarchy of opgen.

Every failure a user can cause or fix is an :class:`OpgenError`. The CLI prints it as a single
``error: ...`` line and exits with its ``exit_code``; nothing else ever reaches the user as a
traceback.
"""

from __future__ import annotations

from pathlib import Path


class OpgenError(Exception):
    """Base class: a problem the user can act on. ``str(err)`` is the whole message."""

    exit_code = 1


class UsageError(OpgenError):
    """Raised for a wrong command-line argument or an impossible request (exit code 2)."""

    exit_code = 2


class SpecError(OpgenError):
    """Raised when an op spec is malformed; carries the file and line it points at (exit code 2),
    or no line where the file itself is wrong (missing, unreadable, too large)."""

    exit_code = 2

    def __init__(self, path: Path | str, line: int | None, message: str) -> None:
        self.path = Path(path)
        self.line = line
        self.message = message
        super().__init__(f"{self.path}:{line}: {message}" if line is not None
                         else f"{self.path}: {message}")


class TemplateError(OpgenError):
    """Raised when a template fails to render: a bug in opgen or in a user's template."""


class WriteError(OpgenError):
    """Raised when generated files cannot be written, or would overwrite something they must not."""


class ToolchainError(OpgenError):
    """Raised when Paddle, a compiler or the CUDA toolkit needed for a build is missing."""


class BuildError(OpgenError):
    """Raised when compiling an op fails; the message holds the first compiler error."""


class DeployError(OpgenError):
    """Raised when a saved model cannot be loaded as it is: not a saved model, or it needs custom
    ops this process has not registered (the message names them and how to register them)."""


class BenchError(OpgenError):
    """Raised when a benchmark step fails part-way; the message names the step. The rows
    measured before it are still reported and written."""


class DriftError(OpgenError):
    """Raised by ``generate --check`` when generated files differ from what is on disk."""


class MergeError(OpgenError):
    """Raised when edits cannot be merged at all: git missing or failing, a broken answers file,
    or conflict markers from the last regenerate still unresolved."""


class ConflictError(OpgenError):
    """Raised (by the CLI) after a regenerate wrote conflict markers, naming the files."""

    def __init__(self, dest: Path, paths: list[str], *, pretend: bool = False) -> None:
        self.paths = paths
        several = len(paths) > 1
        verb = "would have" if pretend else ("have" if several else "has")
        super().__init__(
            f"{dest}: {len(paths)} file{'s' if several else ''} {verb} merge conflicts "
            f"({', '.join(paths)}); keep what you want between the '<<<<<<< ours' "
            f"and '>>>>>>> new render' lines, remove the markers, then build")


class TeamError(OpgenError):
    """Raised when a team repository cannot be made or updated: copier or git failing, a dirty
    repository, a template version that cannot be found."""


class UpdateConflictError(OpgenError):
    """Raised (by the CLI) after ``opgen update`` left conflict markers, naming the files."""

    def __init__(self, dest: Path, paths: list[str]) -> None:
        self.paths = paths
        super().__init__(f"{dest}: the update conflicts with local changes in {', '.join(paths)}; "
                         "resolve the '<<<<<<< before updating' blocks, then commit")
