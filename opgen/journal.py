"""Updating the files of an op folder in place, all or nothing, with a journal.

The folder itself is never replaced, so a shell, editor or notebook sitting in it keeps working.
Each new file is written beside its final path (``.NAME.opgen-new``) and renamed over it, so a
reader sees a whole old file or a whole new one, never a torn one. What makes the set of renames
all-or-nothing is ``<op>/.opgen/journal.json``, written (and fsynced) before the first staged file:

1. **journal**: every step (a path, the hash of its new content or none for a deletion, whether
   it existed) and the folders the update creates;
2. **stage**: each new file written and fsynced beside its final path;
3. **install**: per step, the old file hard-linked to ``.NAME.opgen-old`` (the backup), then the
   staged file renamed over it (or, for a deletion, the file unlinked);
4. **finish**: folders fsynced, backups deleted, the journal deleted last.

Every step is idempotent. A run killed anywhere leaves the journal, and the next writer of the
op (:func:`recover`, called under the op's lock) rolls it *forward* when every new content is at
hand (staged, or already installed), else *back* (backups renamed over, created files deleted).
An exception in the running process rolls back at once. Staged files exist in full only once
step 2 is done, so a kill while staging ends with the old op and a kill while installing with the
new one.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import stat
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath

from .errors import WriteError

#: Where an op folder keeps the journal of an update in progress, relative to the folder.
JOURNAL = ".opgen/journal.json"
#: Suffixes of a file's staged new version and of its backup, both beside it (dot-prefixed).
NEW, OLD = ".opgen-new", ".opgen-old"


@dataclass(frozen=True)
class Step:
    """One file of an update: ``path`` (relative to the op folder) gets the content hashed
    ``sha256``, or is deleted when that is None; ``existed`` says whether it was there before."""

    path: str
    sha256: str | None
    existed: bool


@dataclass(frozen=True)
class Journal:
    """The steps of one update, and the folders it creates (relative; ``.`` is the op folder)."""

    steps: list[Step]
    new_dirs: list[str]


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def staged(dest: Path, rel: str) -> Path:
    """Where the new version of ``dest/rel`` is written before it is renamed into place."""
    path = dest / rel
    return path.with_name(f".{path.name}{NEW}")


def backup(dest: Path, rel: str) -> Path:
    """Where the old version of ``dest/rel`` is kept until the update is finished."""
    path = dest / rel
    return path.with_name(f".{path.name}{OLD}")


def pending(dest: Path) -> Path | None:
    """The journal of an interrupted update of ``dest``, if one is left."""
    journal = dest / JOURNAL
    return journal if journal.exists() else None


def update(dest: Path, writes: dict[str, bytes], deletes: list[str], *,
           shown: Path | None = None) -> None:
    """Write ``writes`` (relative path -> bytes) into ``dest`` and delete ``deletes``: every
    change, or none of them when this raises. The caller holds the op's lock. ``shown``: the
    folder as the user named it (``dest`` with links resolved), for errors."""
    steps = [Step(rel, sha256(data), _exists(dest / rel)) for rel, data in writes.items()]
    steps += [Step(rel, None, True) for rel in deletes]
    for rel in writes:
        _check_target(shown or dest, rel)
    journal = Journal(steps, _missing_dirs(dest, [*writes, JOURNAL]))
    try:
        _save(dest, journal)
        for rel, data in writes.items():
            _stage(dest, rel, data)
        for step in steps:
            _install(dest, step)
    except BaseException:
        _roll_back(dest, journal)  # if this fails too, the journal stays for the next run
        raise
    _finish(dest, journal)


def recover(dest: Path) -> None:
    """Finish or undo an update of ``dest`` that a killed run left (the caller holds the lock)."""
    path = dest / JOURNAL
    if not path.exists():
        _discard(staged(dest, JOURNAL))  # killed while writing the journal: nothing began
        return
    journal = _load(dest)
    if all(_available(dest, step) for step in journal.steps):
        for step in journal.steps:
            _install(dest, step)
        _finish(dest, journal)
    else:
        _roll_back(dest, journal)


# -- the steps -----------------------------------------------------------------------------


def _install(dest: Path, step: Step) -> None:
    """Roll one step forward: back up the old file, then rename the new one over it (or delete
    the old one). Idempotent."""
    path, new, old = dest / step.path, staged(dest, step.path), backup(dest, step.path)
    if step.sha256 is not None and _hash(path) == step.sha256:
        _discard(new)  # already installed
        return
    if step.existed and _exists(path) and not _exists(old):
        _link(path, old)
    if step.sha256 is None:
        _discard(path)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        os.replace(new, path)


def _undo(dest: Path, step: Step) -> None:
    """Roll one step back: the backup returns, a file the update created goes. Idempotent."""
    path, new, old = dest / step.path, staged(dest, step.path), backup(dest, step.path)
    if _exists(old):
        path.parent.mkdir(parents=True, exist_ok=True)
        os.replace(old, path)
        _discard(old)  # still there when it was a hard link of ``path`` itself
    elif not step.existed and step.sha256 is not None and _hash(path) == step.sha256:
        path.unlink()
    _discard(new)


def _roll_back(dest: Path, journal: Journal) -> None:
    """Undo every step, last first, then drop the journal and the folders the update made."""
    for step in reversed(journal.steps):
        _undo(dest, step)
    _discard(staged(dest, JOURNAL))
    _discard(dest / JOURNAL)
    for rel in sorted(journal.new_dirs, key=lambda d: -len(PurePosixPath(d).parts)):
        _rmdir_if_empty(dest / rel)


def _finish(dest: Path, journal: Journal) -> None:
    """Make the renames durable, then drop the backups, the journal (last) and the folders
    that deletions left empty."""
    for folder in sorted({(dest / s.path).parent for s in journal.steps}):
        if folder.is_dir():
            _fsync_dir(folder)
    for step in journal.steps:
        _discard(backup(dest, step.path))
    _discard(dest / JOURNAL)
    for path in [dest / JOURNAL] + [dest / s.path for s in journal.steps if s.sha256 is None]:
        _prune(dest, path.parent)


def _available(dest: Path, step: Step) -> bool:
    """Whether the step's new content is at hand: staged, or already in place."""
    return step.sha256 is None or step.sha256 in (_hash(staged(dest, step.path)),
                                                  _hash(dest / step.path))


# -- the journal file ----------------------------------------------------------------------


def _save(dest: Path, journal: Journal) -> None:
    """Write the journal durably: a staged copy, fsynced, renamed into place."""
    data = {"_note": "Written by opgen while it updates this op; see docs/architecture.md.",
            "version": 1, "steps": [asdict(s) for s in journal.steps],
            "new_dirs": journal.new_dirs}
    path, tmp = dest / JOURNAL, staged(dest, JOURNAL)
    _write(tmp, json.dumps(data, indent=1).encode() + b"\n")
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _load(dest: Path) -> Journal:
    path = dest / JOURNAL
    try:
        data = json.loads(path.read_text())
        steps = [Step(str(s["path"]), s["sha256"], bool(s["existed"])) for s in data["steps"]]
        new_dirs = [str(d) for d in data["new_dirs"]]
        for rel in [s.path for s in steps] + new_dirs:
            _check_inside(rel)
        if any(s.sha256 is not None and not isinstance(s.sha256, str) for s in steps):
            raise TypeError("a sha256 that is not a string")
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise WriteError(f"{path}: not an opgen journal ({type(exc).__name__}: {exc}); an "
                         "update of this op was interrupted: check its files (.NAME.opgen-new "
                         "beside a file is its new version, .NAME.opgen-old its old one), then "
                         "delete the journal") from None
    return Journal(steps, new_dirs)


def _check_inside(rel: str) -> None:
    parts = PurePosixPath(rel).parts
    if not parts or parts[0] == "/" or ".." in parts:
        raise ValueError(f"{rel!r} is not a path inside the op folder")


# -- files ---------------------------------------------------------------------------------


def _stage(dest: Path, rel: str, data: bytes) -> None:
    """Write the new version of ``dest/rel`` beside it, with the old version's permissions (a
    file the user made read-only or executable stays so)."""
    path = dest / rel
    mode = None
    if path.is_file() and not path.is_symlink():
        # never set-user-ID or set-group-ID: the new file is owned by whoever runs opgen
        mode = stat.S_IMODE(path.stat().st_mode) & ~(stat.S_ISUID | stat.S_ISGID)
    _write(staged(dest, rel), data, mode)


def _write(path: Path, data: bytes, mode: int | None = None) -> None:
    """Write a fresh file (a new inode: never through a link into an old one), fsynced; with
    ``mode`` its permissions are set before its bytes are written, where the filesystem keeps
    permissions at all (vfat, some network mounts: not, and the file is written as it comes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    _discard(path)
    with open(path, "wb") as fh:
        if mode is not None and mode != stat.S_IMODE(os.fstat(fh.fileno()).st_mode):
            with contextlib.suppress(OSError):
                os.fchmod(fh.fileno(), mode)
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def _check_target(dest: Path, rel: str) -> None:
    """Refuse a write that would replace a folder, or that needs a folder where a file is."""
    path = dest / rel
    if path.is_dir() and not path.is_symlink():
        raise WriteError(f"{path}: is a folder, where opgen writes a file; move it away")
    for parent in path.parents:
        if parent == dest:
            break
        if _exists(parent) and not parent.is_dir():
            raise WriteError(f"{parent}: is a file, where opgen needs a folder; move it away")


def _link(path: Path, old: Path) -> None:
    """Keep ``path``'s current file as ``old``: a hard link, or a copy where links fail."""
    try:
        os.link(path, old, follow_symlinks=False)
    except OSError:
        try:
            shutil.copy2(path, old, follow_symlinks=False)
        except BaseException:
            _discard(old)  # a partial copy must never be restored
            raise


def _exists(path: Path) -> bool:
    return path.is_symlink() or path.exists()


def _hash(path: Path) -> str | None:
    """The SHA-256 of a regular file's bytes; None for anything else (missing, link, folder)."""
    if not path.is_file() or path.is_symlink():
        return None
    return sha256(path.read_bytes())


def _discard(path: Path) -> None:
    """Unlink ``path`` if it is there (a file or a link)."""
    if _exists(path):
        path.unlink()


def _missing_dirs(dest: Path, rels: list[str]) -> list[str]:
    """The folders (relative to ``dest``; ``.`` is ``dest``) that writing ``rels`` creates."""
    missing = {".": None} if not dest.exists() else {}
    for rel in rels:
        for parent in reversed(PurePosixPath(rel).parents[:-1]):
            if not (dest / parent).exists():
                missing[parent.as_posix()] = None
    return list(missing)


def _rmdir_if_empty(folder: Path) -> None:
    if folder.is_dir() and not folder.is_symlink() and not any(folder.iterdir()):
        folder.rmdir()


def _prune(dest: Path, folder: Path) -> None:
    """Remove ``folder`` and then each parent it leaves empty, up to (not including) ``dest``."""
    while folder != dest and folder.is_relative_to(dest):
        if not folder.is_dir() or any(folder.iterdir()):
            break
        folder.rmdir()
        folder = folder.parent


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
