"""Applying a :class:`~opgen.render.Plan` to an op folder: compare, report, write atomically.

The folder stays where it is (a shell or notebook sitting in it keeps working); its files are
updated in place, each one written beside its final path and renamed over it, with a journal
that makes the whole update all-or-nothing even across a killed run (:mod:`opgen.journal`).
Files that are not opgen's are never touched. A lock serializes concurrent writers of one folder;
it is re-entrant, so a caller can hold it while it reads the folder, decides what to write
(:mod:`opgen.merge`) and applies that.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

import yaml
from filelock import FileLock, Timeout

from . import journal
from .errors import UsageError, WriteError
from .render import Plan

ANSWERS_FILE = ".opgen-answers.yml"


def refuse_a_file_on_the_way(folder: Path, flag: str | None = None) -> None:
    """Refuse a ``folder`` to write into that is a file or lies below one, or is reached
    through a link to nothing (writing would make its target, wherever it points) or a loop of
    links; the error starts with ``flag``, the option and value that gave it, where one did."""
    where = f"{flag}: " if flag else ""
    for path in (folder, *folder.parents):
        if path.is_symlink() and not path.exists():  # dangling, or a loop of links
            try:
                path.resolve(strict=True)
            except RuntimeError:  # Python 3.11's word for ELOOP
                raise UsageError(f"{where}{path}: a loop of symbolic links") from None
            except OSError:
                raise UsageError(f"{where}{path}: a link to {os.readlink(path)}, which does "
                                 "not exist") from None
        if path.exists():
            if not path.is_dir():
                raise UsageError(f"{where}{path}: exists and is not a folder")
            return


def takes_an_entry(folder: Path) -> bool:
    """Whether ``folder`` lets this process make an entry in it, tried with one made and removed:
    ``os.access`` says yes to root, even in /proc."""
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".opgen-probe-", dir=folder))
    except OSError:
        return False
    return True


def refuse_an_unwritable_folder(folder: Path, flag: str | None = None) -> None:
    """:func:`refuse_a_file_on_the_way`, then refuse a ``folder`` whose nearest existing folder
    takes no new entry (:func:`takes_an_entry`): refused before minutes of work, not by a
    temporary folder's name after them."""
    refuse_a_file_on_the_way(folder, flag)
    # "." exists even where the working folder was deleted, so some folder of it always does
    existing = next(p for p in (folder, *folder.parents) if p.exists())
    if not takes_an_entry(existing):
        what = "not writable" if existing == folder else f"{existing} is not writable"
        raise UsageError(f"{flag or folder}: {what}")


def refuse_an_op_folder(folder: Path, flag: str | None, *, writes: bool) -> None:
    """Refuse what cannot become the op folder ``folder``: for a command that ``writes``, a
    folder to make where none can be made (:func:`refuse_an_unwritable_folder`); else, and for an
    existing folder (whose op may need no write; the writer says when one fails), a file on the
    way (:func:`refuse_a_file_on_the_way`)."""
    if writes and not folder.is_dir():
        refuse_an_unwritable_folder(folder, flag)
    else:
        refuse_a_file_on_the_way(folder, flag)


class Status(str, Enum):
    """What happens to one file of an op; the value is what the CLI prints."""

    CREATE = "create"  #: new file
    IDENTICAL = "identical"  #: already what it should be
    OVERWRITE = "overwrite"  #: replaced; it held no edits of the user's
    MERGED = "merged"  #: the user's edits and the new render, merged cleanly
    CONFLICT = "conflict"  #: merged with conflict markers for the user to resolve
    KEEP = "keep"  #: the user's edited file stays as it is
    KEEP_DELETED = "keep-deleted"  #: deleted by the user, so not written again
    REMOVE = "remove"  #: no longer generated, and unedited: deleted


@dataclass(frozen=True)
class Change:
    path: str
    status: Status


def compare(plan: Plan, dest: Path) -> list[Change]:
    """How each planned file relates to what is on disk under ``dest``."""
    changes = []
    for rel in plan.paths():
        target = dest / rel
        if not target.exists():
            status = Status.CREATE
        elif target.is_file() and target.read_bytes() == plan.files[rel]:
            status = Status.IDENTICAL
        else:
            status = Status.OVERWRITE
        changes.append(Change(rel, status))
    return changes


sha256 = journal.sha256  #: the hex SHA-256 of some bytes, as the answers file records it


def real_folder(dest: Path) -> Path:
    """The op folder ``dest`` with symbolic links resolved: written there, the links stay."""
    return Path(dest).resolve()


def recorded_answers(folder: Path) -> dict:
    """What the last ``opgen generate`` recorded in ``folder``'s answers file (its spec, the
    spec's hash, the files'), or {} where there is none that reads as a mapping: missing, not
    UTF-8, not YAML, nested past the parser."""
    try:
        answers = yaml.safe_load((folder / ANSWERS_FILE).read_text())
    except (OSError, ValueError, yaml.YAMLError, RecursionError):
        return {}
    return answers if isinstance(answers, dict) else {}


@contextmanager
def locked(dest: Path, timeout: float = 600) -> Iterator[None]:
    """Hold the write lock of the op folder ``dest`` (a lock file beside it), after finishing or
    undoing any update a killed run left in it (:func:`opgen.journal.recover`).

    Re-entrant within a thread: :func:`apply` called while the lock is held does not wait on it.
    """
    dest = real_folder(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    path = dest.parent / f".{dest.name}.opgen.lock"
    # filelock waits out the timeout when it cannot create the file at all (a read-only folder,
    # /proc): that is no other process's lock, and is said at once.
    try:
        os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o644))
    except OSError as exc:
        raise WriteError(f"{dest}: cannot create its lock file {path}: "
                         f"{exc.strerror or exc}") from None
    lock = FileLock(str(path), is_singleton=True)
    try:
        lock.acquire(timeout=timeout)
    except Timeout:
        raise WriteError(f"{dest}: another opgen process holds its lock") from None
    try:
        if dest.is_dir():
            journal.recover(dest)
        yield
    finally:
        lock.release()


def apply(plan: Plan, dest: Path, *, extra: dict[str, bytes] | None = None,
          remove: Iterable[str] = ()) -> list[Change]:
    """Write ``plan`` (plus ``extra`` files, e.g. the spec or the answers file) into ``dest``, and
    delete the files named in ``remove`` (relative paths; empty folders they leave go too).

    Other files of ``dest`` are kept. Either every change is made or, on any failure, ``dest`` is
    left exactly as it was. A ``dest`` reached through a symbolic link is written where it points.
    """
    files = {**plan.files, **(extra or {})}
    real = real_folder(dest)
    if real.exists() and not real.is_dir():
        raise WriteError(f"{dest}: exists and is not a folder")
    with locked(real):
        changes = compare(Plan(files), real)
        writes = {c.path: files[c.path] for c in changes if c.status is not Status.IDENTICAL}
        deletes = sorted(rel for rel in set(remove) - set(files)
                         if (real / rel).is_file() or (real / rel).is_symlink())
        if writes or deletes:
            journal.update(real, writes, deletes, shown=Path(dest))
    return changes
