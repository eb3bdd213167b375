"""Regenerating an op without losing the user's edits: a three-way merge per generated file.

Every ``opgen generate`` keeps a snapshot of exactly what it rendered in the op's ``.opgen/base/``
(hashes in ``.opgen-answers.yml``). The next one merges, file by file, as ``copier update`` does:
*base* is that snapshot (the last render), *ours* the file on disk, *theirs* the new render.
Unedited files take the new render; edited ones are merged with ``git merge-file``, and what does
not merge cleanly is written with conflict markers. A file the user deleted stays deleted; an
edited file the new render no longer produces is kept; nothing the user wrote is dropped.

Nothing here writes: :func:`plan_update` returns what :func:`opgen.writer.apply` should do.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import yaml

from .errors import MergeError
from .writer import ANSWERS_FILE, Change, Status, sha256

#: Where an op keeps the last render of each generated file, relative to the op folder.
BASE_DIR = ".opgen/base"
#: The labels of ``git merge-file``'s conflict markers: ``<<<<<<< ours`` ... ``>>>>>>> new render``.
OURS, BASE, THEIRS = "ours", "last render", "new render"
_CONFLICT_START = f"<<<<<<< {OURS}".encode()
_CONFLICT_END = f">>>>>>> {THEIRS}".encode()


@dataclass(frozen=True)
class Update:
    """What a regenerate does to one op folder.

    ``files`` are written (merged and new files, the new base snapshot, the answers file),
    ``remove`` deleted; ``changes`` lists one status per generated file and the answers file.
    """

    files: dict[str, bytes]
    remove: list[str]
    changes: list[Change]

    @property
    def conflicts(self) -> list[str]:
        return [c.path for c in self.changes if c.status is Status.CONFLICT]


def load_base(dest: Path) -> dict[str, bytes | None]:
    """The last render of each file generated into ``dest``: path -> bytes, or None where the
    file was generated but its content is gone (an op from before base snapshots, or a damaged
    snapshot). A path missing from the result was not generated last time."""
    answers = dest / ANSWERS_FILE
    if not answers.is_file():
        return {}
    recorded = None
    try:
        data = yaml.safe_load(answers.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        why = f"not YAML at line {mark.line + 1}" if mark is not None else "not YAML"
    except UnicodeDecodeError:
        why = "not UTF-8 text"
    except RecursionError:
        why = "nested too deep"
    else:
        recorded = data.get("files") if isinstance(data, dict) else None
        why = "no 'files:' mapping in it"
    if not isinstance(recorded, dict):
        raise MergeError(f"{answers}: not an opgen answers file ({why}); restore it from version "
                         "control, or delete it to merge every edited file as a conflict")
    base: dict[str, bytes | None] = {}
    for rel, digest in recorded.items():
        parts = PurePosixPath(str(rel)).parts
        if not isinstance(rel, str) or not parts or parts[0] == "/" or ".." in parts:
            raise MergeError(f"{answers}: file {rel!r} is not a path inside the op folder")
        base[rel] = None
        for candidate in (dest / BASE_DIR / rel, dest / rel):  # an unedited file is its own base
            if candidate.is_file() and sha256(content := candidate.read_bytes()) == digest:
                base[rel] = content
                break
    return base


def plan_update(dest: Path, generated: dict[str, bytes], bookkeeping: dict[str, bytes], *,
                protect: Collection[str] = ()) -> Update:
    """Merge the new render ``generated`` into the op folder ``dest``.

    ``bookkeeping`` (the answers file and the new base snapshot) is written as is. Paths in
    ``protect`` (the spec being generated from) are never merged or removed.
    """
    base = load_base(dest)
    files = dict(bookkeeping)
    remove: list[str] = []
    changes: list[Change] = []
    stuck = []
    for rel in sorted((set(generated) | set(base)) - set(protect)):
        target = dest / rel
        ours = target.read_bytes() if target.is_file() else None
        theirs = generated.get(rel)
        if ours is None and theirs is not None:  # deleted, or replaced by something else
            _refuse_replaced(dest, target)
        if ours is None and theirs is None:
            continue  # generated last time, gone now, and no longer generated
        try:
            status, data = decide(rel in base, base.get(rel), ours, theirs)
        except MergeError as exc:
            raise MergeError(f"{target}: {exc}") from None
        if ours is not None and has_conflict_markers(ours):
            if status in (Status.MERGED, Status.CONFLICT):
                stuck.append(rel)  # merging again would nest the markers
            elif status is Status.KEEP:
                status = Status.CONFLICT  # still unresolved: keep saying so
        if status is Status.REMOVE:
            remove.append(rel)
        elif data is not None:
            files[rel] = data
        changes.append(Change(rel, status))
    if stuck:
        raise MergeError(f"{dest}: unresolved conflict markers from the last regenerate in "
                         f"{', '.join(stuck)}; resolve them first")
    snapshot = dest / BASE_DIR
    if snapshot.is_dir():
        remove += sorted(rel for p in snapshot.rglob("*") if p.is_file()
                         and (rel := p.relative_to(dest).as_posix()) not in bookkeeping)
    answers = bookkeeping.get(ANSWERS_FILE)
    if answers is not None:
        on_disk = dest / ANSWERS_FILE
        status = (Status.CREATE if not on_disk.is_file() else
                  Status.IDENTICAL if on_disk.read_bytes() == answers else Status.OVERWRITE)
        changes.append(Change(ANSWERS_FILE, status))
    return Update(files, remove, changes)


def _refuse_replaced(dest: Path, target: Path) -> None:
    """Refuse a generated file that is now a folder (or a FIFO), or that a file stands on the
    way to (``csrc`` a file): not a file the user deleted, and nothing opgen can write."""
    if target.exists():
        what = "a folder" if target.is_dir() else "not a regular file"
        raise MergeError(f"{target}: is {what}, where opgen writes a file; move it away")
    for parent in target.parents:
        if parent == dest:
            return
        if parent.exists() and not parent.is_dir():
            raise MergeError(f"{parent}: is a file, where opgen needs a folder; move it away")


def decide(generated_before: bool, base: bytes | None, ours: bytes | None,
           theirs: bytes | None) -> tuple[Status, bytes | None]:
    """The outcome for one file, and its new content (None: nothing to write).

    ``generated_before``: the last render produced this path; ``base`` its content then (None if
    unknown); ``ours`` the file on disk; ``theirs`` the new render (None: no longer produced).
    """
    if theirs is None:
        return (Status.REMOVE, None) if ours is None or ours == base else (Status.KEEP, None)
    if ours is None:
        return (Status.KEEP_DELETED, None) if generated_before else (Status.CREATE, theirs)
    if ours == theirs:
        return Status.IDENTICAL, None
    if base is not None and ours == base:
        return Status.OVERWRITE, theirs
    if base is not None and theirs == base:
        return Status.KEEP, None
    # Without a known base (the file predates opgen, or its snapshot is gone) both versions are
    # "added" over nothing: every difference becomes a conflict, and ours survives in full.
    merged, conflicted = merge3(ours, base or b"", theirs)
    return (Status.CONFLICT if conflicted else Status.MERGED), merged


def merge3(ours: bytes, base: bytes, theirs: bytes) -> tuple[bytes, bool]:
    """``git merge-file``: the merged bytes, and whether they hold conflict markers."""
    git = shutil.which("git")
    if git is None:
        raise MergeError("git is needed to merge your edits with the new render, and it is not "
                         "on PATH; install git")
    with tempfile.TemporaryDirectory(prefix="opgen-merge-") as tmp:
        paths = []
        for name, data in (("ours", ours), ("base", base), ("theirs", theirs)):
            path = Path(tmp) / name
            path.write_bytes(data)
            paths.append(str(path))
        # The conflict style is pinned: a user's merge.conflictStyle=diff3 must not change
        # what opgen writes.
        proc = subprocess.run([git, "-c", "merge.conflictStyle=merge", "merge-file", "-p",
                               "-L", OURS, "-L", BASE, "-L", THEIRS, *paths],
                              capture_output=True, cwd=tmp, check=False)
    if not 0 <= proc.returncode < 128:  # the number of conflicts, or -1 (255) on an error
        message = proc.stderr.decode(errors="replace").strip().splitlines() or ["no output"]
        raise MergeError(f"git merge-file failed: {message[0]}")
    return proc.stdout, proc.returncode > 0




def has_conflict_markers(data: bytes) -> bool:
    """Whether ``data`` still holds a conflict block written by a regenerate."""
    lines = data.splitlines()
    return _CONFLICT_START in lines and _CONFLICT_END in lines
