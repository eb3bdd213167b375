"""Applying a :class:`~opgen.render.Plan` to an op folder: compare, report, write atomically.

The folder is replaced as a whole: a staging copy (unchanged files hard-linked, new ones
written, removed ones left out) is swapped in with one ``renameat2(RENAME_EXCHANGE)``, so a reader
or an interrupted run sees either the old op or the new one, never a mix. A lock serializes
concurrent writers of one folder; it is re-entrant, so a caller can hold it while it reads the
folder, decides what to write (:mod:`opgen.merge`) and applies that.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from filelock import FileLock, Timeout

from .errors import WriteError
from .render import Plan

ANSWERS_FILE = ".opgen-answers.yml"
#: Folders inside an op that are never copied into a staging folder (build outputs and caches).
_SKIP_DIRS = {"build", "__pycache__", ".pytest_cache"}


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


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@contextmanager
def locked(dest: Path, timeout: float = 600) -> Iterator[None]:
    """Hold the write lock of the op folder ``dest`` (a sibling lock file, so it survives swaps).

    Re-entrant within a thread: :func:`apply` called while the lock is held does not wait on it.
    """
    dest = dest.absolute()
    dest.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(dest.parent / f".{dest.name}.opgen.lock"), is_singleton=True)
    try:
        with lock.acquire(timeout=timeout):
            yield
    except Timeout:
        raise WriteError(f"{dest}: another opgen process holds its lock") from None


def apply(plan: Plan, dest: Path, *, extra: dict[str, bytes] | None = None,
          remove: Iterable[str] = ()) -> list[Change]:
    """Write ``plan`` (plus ``extra`` files, e.g. the spec or the answers file) into ``dest``, and
    delete the files named in ``remove`` (relative paths; empty folders they leave go too).

    Other files of ``dest`` are kept. Either every change is made or, on any failure, ``dest`` is
    left exactly as it was.
    """
    files = dict(plan.files)
    files.update(extra or {})
    full = Plan(files)
    changes = compare(full, dest)
    dest = dest.absolute()
    doomed = sorted(rel for rel in remove if (dest / rel).is_file() or (dest / rel).is_symlink())
    if not doomed and all(c.status is Status.IDENTICAL for c in changes):
        if any(dest.parent.glob(f".{dest.name}.opgen-*")):
            with locked(dest):
                _recover(dest)
        return changes
    with locked(dest):
        _recover(dest)
        staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.opgen-", dir=dest.parent))
        os.chmod(staging, dest.stat().st_mode & 0o7777 if dest.exists() else _default_dir_mode())
        try:
            if dest.exists():
                _link_tree(dest, staging)
            for rel in doomed:
                _remove(staging, rel)
            for rel, data in files.items():
                _write(staging / rel, data)
            _swap_in(staging, dest)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return changes


def _default_dir_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o777 & ~umask


def _link_tree(src: Path, dst: Path) -> None:
    """Mirror ``src`` into ``dst`` with hard links (copies where links are impossible)."""
    for root, dirs, names in os.walk(src):
        dirs[:] = [d for d in dirs if d not in _SKIP_DIRS or Path(root) != src]
        rel = Path(root).relative_to(src)
        (dst / rel).mkdir(parents=True, exist_ok=True)
        for name in names:
            source, target = Path(root) / name, dst / rel / name
            if source.is_symlink():
                target.symlink_to(os.readlink(source))
                continue
            try:
                os.link(source, target)
            except OSError:
                shutil.copy2(source, target)
    for skipped in _SKIP_DIRS:
        if (src / skipped).is_dir():  # build outputs move with the op instead of being copied
            (dst / skipped).mkdir(exist_ok=True)


def _remove(root: Path, rel: str) -> None:
    """Delete ``root/rel`` and then each parent folder it leaves empty, up to ``root``."""
    path = root / rel
    path.unlink()
    for parent in path.parents:
        if parent == root or not parent.is_relative_to(root) or any(parent.iterdir()):
            break
        parent.rmdir()


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() or path.is_symlink():
        path.unlink()  # never write through a hard link into the old folder's file
    with open(path, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths (Linux renameat2); False where the call is unavailable."""
    libc_name = ctypes.util.find_library("c")
    if not libc_name:
        return False
    libc = ctypes.CDLL(libc_name, use_errno=True)
    func = getattr(libc, "renameat2", None)
    if func is None:
        return False
    result = func(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    return result == 0


def _recover(dest: Path) -> None:
    """Clean up after a writer that was killed (the lock is ours, so none is running): its
    staging folders go, and build outputs it had moved into one come back to the op."""
    for stale in sorted(dest.parent.glob(f".{dest.name}.opgen-*")):
        if not stale.is_dir():
            continue
        for skipped in _SKIP_DIRS:
            moved = stale / skipped
            if dest.is_dir() and moved.is_dir() and not (dest / skipped).exists():
                os.rename(moved, dest / skipped)
        shutil.rmtree(stale, ignore_errors=True)


def _swap_in(staging: Path, dest: Path) -> None:
    if not dest.exists():
        staging.rename(dest)
        staging.mkdir()  # the caller removes the (now empty) staging path
        return
    # Build outputs are moved, not copied: swap them over before the folders trade places, and
    # back again if the exchange does not happen.
    moved = []
    try:
        for skipped in _SKIP_DIRS:
            old = dest / skipped
            if old.is_dir():
                new = staging / skipped
                new.rmdir()
                os.rename(old, new)
                moved.append(skipped)
        exchanged = _exchange(staging, dest)
    except BaseException:
        for skipped in moved:
            os.rename(staging / skipped, dest / skipped)
        raise
    if not exchanged:
        backup = dest.with_name(dest.name + ".opgen-old")
        shutil.rmtree(backup, ignore_errors=True)
        dest.rename(backup)
        staging.rename(dest)
        backup.rename(staging)
