"""Team repositories: ``opgen init`` renders the copier template in ``templates/team``, and
``opgen update`` moves a team repository to a newer version of it, keeping the team's changes.

Copier reads a template's versions from the git tags of the repository holding it, and ``copier
update`` re-renders the *old* version to tell the team's changes from the template's. But
``templates/team`` is a folder inside opgen (a checkout, or an installed package), and opgen's own
tags version opgen, not the template. So opgen publishes the template into a git repository of
its own, the *template store* (``~/.cache/opgen/team-template``; ``$OPGEN_TEMPLATE_STORE``): one
commit per distinct content, tagged ``<version>+<tree>``, where ``<version>`` is
``_opgen_template_version`` from the template's ``copier.yml`` and ``<tree>`` begins git's id of
the content. The same content gets the same tag on every machine; a version missing from a store
(a repository made on another machine) is restored from opgen's git history when opgen runs from
a checkout. Team repositories record the store as ``~/...``, so plain ``copier update`` works for
every teammate whose store holds the versions involved (``opgen update`` makes sure of that).
"""

from __future__ import annotations

import importlib.metadata
import io
import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from filelock import FileLock

from . import __version__
from .errors import TeamError, UsageError, WriteError
from .render import templates_root
from .writer import refuse_an_unwritable_folder

STORE_ENV = "OPGEN_TEMPLATE_STORE"
DEFAULT_STORE = "~/.cache/opgen/team-template"
ANSWERS_FILE = ".copier-answers.yml"
VERSION_KEY = "_opgen_template_version"
#: Marks a template store as opgen's (in its ``.git``, so that it is no part of any tagged
#: content): opgen replaces every file of its store, so it must never take a folder of the user's
#: for one.
STORE_MARKER = "opgen-template-store"
#: The subject of every commit opgen makes in its store: how a store made before
#: :data:`STORE_MARKER` is recognized (not the author: $GIT_AUTHOR_EMAIL overrides opgen's).
_STORE_COMMIT = re.compile(r"team template \d+(\.\d+)*\+[0-9a-f]{12}")
#: What ``copier update`` writes around a conflict.
UPDATE_MARKERS = (b"<<<<<<< before updating", b">>>>>>> after updating")
#: The store is opgen's private repository: commit as opgen, never sign, never run hooks.
_GIT_AS_OPGEN = ("-c", "user.name=opgen", "-c", "user.email=opgen@localhost",
                 "-c", "commit.gpgSign=false", "-c", "tag.gpgSign=false",
                 "-c", f"core.hooksPath={os.devnull}")
#: Reading a team's repository never writes to it, not even git's opportunistic index refresh.
_READ_ONLY = ("--no-optional-locks", "-c", "core.quotepath=off")


@dataclass(frozen=True)
class TeamResult:
    """What ``init`` or ``update`` did (or, with ``pretend``, would do) to ``dest``."""

    dest: Path
    version: str | None  #: the template version the repository now records (copier's _commit)
    changed: list[str]  #: files created, changed or deleted, relative to ``dest`` (an op's base
    #: snapshot, a mirror of its generated files, left out)
    conflicts: list[str]  #: files holding update conflict markers
    written: bool
    opgen_requirement: str | None = None  #: how ``init`` made the repository install opgen


def template_dir() -> Path:
    """opgen's team template (a copier template)."""
    return templates_root() / "team"


def store_location() -> str:
    """The template store, as recorded in team repositories (``~`` unexpanded)."""
    return os.environ.get(STORE_ENV) or DEFAULT_STORE


def template_version(template: Path) -> str:
    """``_opgen_template_version`` from the template's ``copier.yml``."""
    try:
        config = yaml.safe_load((template / "copier.yml").read_text())
        version = str(config[VERSION_KEY])
    except (OSError, ValueError, yaml.YAMLError, TypeError, KeyError, RecursionError) as exc:
        detail = "nested too deep" if isinstance(exc, RecursionError) else exc
        raise TeamError(f"{template}/copier.yml: no {VERSION_KEY} ({detail})") from None
    if not re.fullmatch(r"\d+(\.\d+)*", version):
        raise TeamError(f"{template}/copier.yml: {VERSION_KEY} must look like 1.2.0, not "
                        f"{version!r}")
    return version


def publish(template: Path | None = None, store: str | None = None) -> str:
    """Commit ``template`` (default: opgen's) into the template store unless that content is
    already there; return its tag."""
    template = template or template_dir()
    version = template_version(template)
    with _store(store) as root:
        _refill(root, lambda dst: shutil.copytree(
            template, dst, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__")))
        return _commit_and_tag(root, version)


def default_opgen_requirement() -> str:
    """A pip requirement that installs this opgen in another environment: its source checkout
    when it runs from one, else what it was installed from (``direct_url.json``: a folder, a
    wheel or archive, a VCS URL at the installed commit), else this version from an index."""
    checkout = _source_checkout()
    if checkout is not None:
        return f"opgen @ {checkout.as_uri()}"
    return _installed_from() or f"opgen=={__version__}"


def opgen_requirement(text: str) -> str:
    """``--opgen-requirement``: a folder or a wheel (made a ``file://`` URL), a URL (``git+...``,
    ``https://...``), or a pip requirement naming opgen; anything else is a :class:`UsageError`."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    text = text.strip()
    path = Path(text).expanduser()
    if "://" not in text and text and path.exists():
        return f"opgen @ {path.resolve().as_uri()}"
    if re.match(r"^[a-z][a-z0-9+.-]*://", text):
        text = f"opgen @ {text}"
    try:
        requirement = Requirement(text)
    except InvalidRequirement:
        requirement = None
    if requirement is None or canonicalize_name(requirement.name) != "opgen" or '"' in text:
        raise UsageError(f"--opgen-requirement {text!r}: expected a folder or wheel that exists, "
                         "a URL (git+https://...) or a requirement for opgen "
                         "('opgen @ git+https://...')")
    return text


def _source_checkout() -> Path | None:
    """opgen's source folder when this opgen runs from one (a checkout, an editable install)."""
    root = Path(__file__).resolve().parent.parent
    pyproject = root / "pyproject.toml"
    if not (root / "templates" / "team").is_dir() or not pyproject.is_file():
        return None
    return root if re.search(r'^name = "opgen"$', pyproject.read_text(), re.M) else None


def _installed_from() -> str | None:
    """The requirement recorded by pip in the installed opgen's ``direct_url.json``, if any."""
    try:
        text = importlib.metadata.distribution("opgen").read_text("direct_url.json")
        data = json.loads(text) if text else None
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("url"), str):
        return None
    vcs = data.get("vcs_info")
    if isinstance(vcs, dict) and vcs.get("vcs") and vcs.get("commit_id"):
        return f"opgen @ {vcs['vcs']}+{data['url']}@{vcs['commit_id']}"
    return f"opgen @ {data['url']}"


def init(team_dir: Path | str, *, name: str | None = None, pretend: bool = False,
         template: str | None = None, ref: str | None = None,
         requirement: str | None = None) -> TeamResult:
    """Render a new team repository into ``team_dir`` (which must be missing or empty), generate
    its ops, and make it a git repository unless it lies inside one.

    ``template``/``ref``: a copier template (git repository path or URL) and version to render
    instead of opgen's own. ``requirement``: how the repository installs opgen (see
    :func:`opgen_requirement`; default: :func:`default_opgen_requirement`). ``pretend`` renders
    into a temporary folder and lists the files.
    """
    if name is not None and not name.strip():
        raise UsageError(f"--name {name!r}: the team's name must not be empty; leave --name out "
                         "to name the team after its folder")
    if name is not None and template is None and not re.fullmatch(r"[a-z][a-z0-9_-]*", name):
        # what the template's question accepts, refused before copier runs
        raise UsageError(f"--name {name!r}: use lowercase letters, digits, '-' and '_', "
                         "starting with a letter")
    if template is not None:
        _check_template(template)
    dest = Path(team_dir)
    refuse_an_unwritable_folder(dest)
    if dest.exists() and any(dest.iterdir()):
        hint = (f" (to take a newer template into this one: opgen update {dest})"
                if (dest / ANSWERS_FILE).is_file() else "")
        raise WriteError(f"{dest}: exists and is not empty; opgen init makes a new team "
                         f"repository in a new or empty folder{hint}")
    opgen = opgen_requirement(requirement) if requirement is not None \
        else default_opgen_requirement()
    data = {"team_name": _team_name(dest) if name is None else name, "opgen_requirement": opgen}
    if pretend and template is None and ref is None:
        src: str = str(template_dir())  # a plain folder: previewed without touching the store
    elif template is None:
        src = store_location()
        ref = ref or publish(store=src)
    else:
        src = template
    parent = dest.absolute().parent
    if not pretend:
        parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{dest.name}.opgen-init-",
                                     dir=None if pretend else parent) as tmp:
        staging = Path(tmp) / dest.name
        _copier("run_copy", src_path=src, dst_path=staging, data=data, vcs_ref=ref,
                defaults=True, quiet=True)
        if not (staging / ANSWERS_FILE).is_file():  # named as given, not as staged here
            given = src if template is None else f"--template {template}"
            raise TeamError(f"{given}: not a team template (it renders no "
                            f"{ANSWERS_FILE}, so opgen update could not update the repository); "
                            "give a copier template like opgen's templates/team")
        _generate_ops(staging)
        changed = sorted(rel for p in staging.rglob("*") if p.is_file()
                         and "/.opgen/base/" not in (rel := p.relative_to(staging).as_posix()))
        version = _answers(staging).get("_commit")
        if not pretend:
            if not _inside_git(parent):
                _git("init", "-q", cwd=staging)
            if dest.exists():
                dest.rmdir()
            staging.rename(dest)
    return TeamResult(dest, version, changed, [], written=not pretend, opgen_requirement=opgen)


def update(team_dir: Path | str, *, pretend: bool = False, ref: str | None = None) -> TeamResult:
    """Move the team repository ``team_dir`` to this opgen's template version (or ``ref``) with
    ``copier update``, keeping its local changes; conflicts are written inline and listed.

    The repository must be committed: the update's changes are then exactly ``git diff``, for
    review, and undone with ``git checkout``. ``pretend`` updates a temporary clone instead,
    holding the uncommitted changes too, and writes nothing, so it works on any repository.
    """
    dest = Path(team_dir)
    answers = _answers(dest)
    src, old = answers.get("_src_path"), answers.get("_commit")
    if not isinstance(src, str) or not isinstance(old, str) or not src.strip() or not old.strip():
        raise TeamError(f"{dest / ANSWERS_FILE}: no _src_path and _commit to update from")
    remote = re.match(r"[A-Za-z][A-Za-z0-9+.-]*:|git@", src)  # a URL, gh:org/repo, git@host:
    if not remote and not Path(src).expanduser().is_dir():
        raise TeamError(f"{dest / ANSWERS_FILE}: _src_path {src}: no such template folder on this "
                        "machine; point it at the template the repository came from")
    if _same_path(src, store_location()):
        ref = ref or publish(store=src)
        restore_version(old, store=src)
    top = _toplevel(dest)
    if not pretend:
        if _git(*_READ_ONLY, "status", "--porcelain", cwd=dest).strip():
            raise TeamError(f"{dest}: has uncommitted changes; commit or stash them first, so "
                            "the update can be reviewed with git diff and undone (or preview "
                            "it with --pretend)")
        return _update_in(dest, dest, ref, written=True)
    with tempfile.TemporaryDirectory(prefix="opgen-update-") as tmp:
        clone = Path(tmp) / "repo"
        _git("clone", "-q", str(top), str(clone), cwd=Path(tmp))
        _commit_uncommitted(top, clone)
        return _update_in(clone / dest.resolve().relative_to(top), dest, ref, written=False)


def restore_version(tag: str, store: str | None = None) -> None:
    """Make sure the template store holds ``tag``: restore it from opgen's git history when it
    is missing and opgen runs from a checkout."""
    with _store(store) as root:
        if _has_tag(root, tag):
            return
        version, _, tree = tag.partition("+")
        checkout = templates_root().parent
        found = _git("rev-parse", "--verify", "--quiet", f"{tree}^{{tree}}", cwd=checkout,
                     check=False).strip() if tree and (checkout / ".git").exists() else ""
        if found:
            archive = _git_bytes("archive", "--format=tar", found, cwd=checkout)
            _refill(root, lambda dst: _untar(archive, dst))
            if _commit_and_tag(root, version) == tag:
                return
        raise TeamError(f"template version {tag} is in neither the template store {root} nor "
                        "this opgen's git history; run `opgen update` with the opgen that made "
                        "the repository (or a checkout that includes it) once")


# -- helpers -------------------------------------------------------------------------------


@contextmanager
def _store(store: str | None) -> Iterator[Path]:
    """The template store's folder, created if needed, locked against other opgen processes.

    A folder that exists must be a store opgen made, or empty: :func:`_refill` deletes every
    file of the store, so any other folder is refused, before even the lock file is written."""
    root = Path(store or store_location()).expanduser().absolute()
    _store_state(root)
    root.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(root.parent / f".{root.name}.lock")):
        state = _store_state(root)  # again: another opgen may have made it meanwhile
        if state == "new":
            _create_store(root)
        elif state == "earlier":
            _mark_store(root / ".git")
        yield root


def _store_state(root: Path) -> Literal["new", "ours", "earlier"]:
    """``new`` when the store ``root`` is missing or empty, ``ours`` when opgen made it,
    ``earlier`` when an opgen from before :data:`STORE_MARKER` did; anything else is a
    :class:`TeamError` naming the folder."""
    if not root.exists():
        return "new"
    if not root.is_dir():
        raise TeamError(f"template store {root}: exists and is not a folder; set {STORE_ENV} "
                        "to a new or empty folder")
    entries = sorted(entry.name for entry in root.iterdir())
    if not entries:
        return "new"
    git_dir = root / ".git"
    if (git_dir / STORE_MARKER).is_file():
        return "ours"
    if _made_by_earlier_opgen(root, entries):
        return "earlier"
    raise TeamError(f"template store {root}: is not empty and is not a store opgen made (no "
                    f".git/{STORE_MARKER}); opgen replaces every file in its store, so set "
                    f"{STORE_ENV} to a new or empty folder")


def _made_by_earlier_opgen(root: Path, entries: list[str]) -> bool:
    """Whether ``root`` (holding ``entries``) is a store made before :data:`STORE_MARKER`: a git
    repository of its own whose every commit is one of opgen's ``team template <tag>``, or, a
    first run cut short, one with no commits and no files."""
    git_dir = root / ".git"
    if not git_dir.is_dir() or git_dir.is_symlink():
        return False
    try:  # --git-dir: never a repository around root, should root/.git not be one
        log = _git(f"--git-dir={git_dir}", "-c", "log.showSignature=false", "log", "--all",
                   "--format=%s", cwd=root)
    except TeamError:
        return False
    commits = log.splitlines()
    if not commits:
        return entries == [".git"]
    return all(_STORE_COMMIT.fullmatch(commit) for commit in commits)


def _create_store(root: Path) -> None:
    """Make ``root`` an empty, marked template store. A missing one is made beside it and
    renamed into place, so that no other opgen ever sees a store without its marker."""
    if root.exists():  # an empty folder, maybe a link to one: made a store where it is
        _git("init", "-q", cwd=root)
        _mark_store(root / ".git")
        return
    staging = Path(tempfile.mkdtemp(prefix=f".{root.name}.opgen-new-", dir=root.parent))
    try:
        _git("init", "-q", cwd=staging)
        _mark_store(staging / ".git")
        staging.rename(root)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _mark_store(git_dir: Path) -> None:
    """Write :data:`STORE_MARKER` into the store's ``git_dir``."""
    (git_dir / STORE_MARKER).write_text(
        "opgen's team template store: opgen replaces every file of this folder but .git\n")


def _refill(root: Path, fill: Callable[[Path], object]) -> None:
    """Replace the store's working tree (everything but .git) with what ``fill`` writes; only
    ever called on a folder :func:`_store` found to be a template store."""
    for entry in root.iterdir():
        if entry.name == ".git":
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    fill(root)


def _commit_and_tag(root: Path, version: str) -> str:
    _git("add", "-A", "--force", cwd=root)  # --force: the template's own .gitignore must not apply
    tree = _git("write-tree", cwd=root).strip()
    head = _git("rev-parse", "--verify", "--quiet", "HEAD^{tree}", cwd=root, check=False).strip()
    tag = f"{version}+{tree[:12]}"
    if head != tree:
        _git(*_GIT_AS_OPGEN, "commit", "-q", "--no-verify", "-m", f"team template {tag}",
             cwd=root)
    if not _has_tag(root, tag):
        _git(*_GIT_AS_OPGEN, "tag", tag, cwd=root)
    return tag


def _has_tag(root: Path, tag: str) -> bool:
    return bool(_git("rev-parse", "--verify", "--quiet", f"refs/tags/{tag}", cwd=root,
                     check=False).strip())


def _untar(archive: bytes, dst: Path) -> None:
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(dst, filter="data")
        else:  # Python < 3.10.12: git's own archive of a tree holds no links or absolute paths
            tar.extractall(dst)  # noqa: S202


def _generate_ops(root: Path) -> None:
    """Generate every op whose spec the template ships (ops/<name>/<name>.yaml)."""
    from . import api

    for spec in sorted(root.glob("ops/*/*.yaml")):
        if spec.stem == spec.parent.name:
            api.generate(spec)
    for lock in root.glob("ops/.*.opgen.lock"):
        lock.unlink()


def _commit_uncommitted(top: Path, clone: Path) -> None:
    """Copy the uncommitted changes of the repository ``top`` (tracked and untracked files, not
    ignored ones) into its ``clone`` and commit them there: a pretend update then starts from the
    files as they are, and lists only what the update itself changes."""
    listed = _git(*_READ_ONLY, "diff", "--name-only", "-z", "HEAD", cwd=top) \
        + _git(*_READ_ONLY, "ls-files", "-z", "--others", "--exclude-standard", cwd=top)
    paths = sorted({rel for rel in listed.split("\0") if rel})
    for rel in paths:
        src, dst = top / rel, clone / rel
        if dst.is_symlink() or dst.is_file():
            dst.unlink()
        if src.is_symlink() or src.is_file():
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst, follow_symlinks=False)
    if paths:
        _git(*_GIT_AS_OPGEN, "add", "-A", cwd=clone)
        _git(*_GIT_AS_OPGEN, "commit", "-q", "--no-verify", "--allow-empty", "-m",
             "uncommitted changes, for opgen update --pretend", cwd=clone)


def _update_in(work: Path, dest: Path, ref: str | None, *, written: bool) -> TeamResult:
    _copier("run_update", dst_path=work, vcs_ref=ref, defaults=True, overwrite=True, quiet=True,
            skip_answered=True, conflict="inline")
    changed = sorted(set(_git("-c", "core.quotepath=off", "diff", "--name-only", "--relative",
                              "HEAD", cwd=work).splitlines())
                     | set(_git("-c", "core.quotepath=off", "ls-files", "--others",
                                "--exclude-standard", cwd=work).splitlines()))
    conflicts = [rel for rel in changed if (work / rel).is_file()
                 and any(m in (work / rel).read_bytes().splitlines() for m in UPDATE_MARKERS)]
    return TeamResult(dest, _answers(work).get("_commit"), changed, conflicts, written=written)


def _copier(function: str, **kwargs: Any) -> Any:
    """Call ``copier.<function>``; its failures become one-line :class:`TeamError` messages."""
    import copier
    from copier.errors import CopierError
    from plumbum import ProcessExecutionError

    try:
        return getattr(copier, function)(**kwargs, unsafe=False)
    except CopierError as exc:
        raise TeamError(f"copier: {' '.join(str(exc).split())}") from None
    except ProcessExecutionError as exc:
        lines = (exc.stderr or "").strip().splitlines() or [str(exc.retcode)]
        raise TeamError(f"copier: {' '.join(map(str, exc.argv[:2]))} failed: {lines[-1]}") \
            from None
    except (ValueError, TypeError) as exc:  # e.g. an answer the template's validator refuses
        raise TeamError(f"copier: {' '.join(str(exc).split())}") from None


def _answers(dest: Path) -> dict[str, Any]:
    path = dest / ANSWERS_FILE
    if not path.is_file():
        raise UsageError(f"{dest}: not a team repository (no {ANSWERS_FILE}); make one with "
                         "opgen init")
    try:
        data = yaml.safe_load(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise TeamError(f"{path}: not UTF-8 text (byte {exc.start}); restore it from git")\
            from None
    except RecursionError:  # PyYAML's constructor recurses once per level of nesting
        raise TeamError(f"{path}: not valid YAML (nested too deep); restore it from git")\
            from None
    except (yaml.YAMLError, ValueError) as exc:  # ValueError: e.g. "!!int x"
        raise TeamError(f"{path}: not valid YAML ({' '.join(str(exc).split())}); restore it "
                        "from git") from None
    return data if isinstance(data, dict) else {}


def _check_template(template: str) -> None:
    """Refuse a ``--template`` on this machine that copier would not read as a template (it
    would copy any folder as it is)."""
    if not template.strip():
        raise UsageError("--template: an empty path")
    path = Path(template).expanduser()
    if not path.exists():
        if re.match(r"[A-Za-z][A-Za-z0-9+.-]*:|git@", template):
            return  # a URL (or gh:org/repo): copier fetches it and names it if it fails
        raise UsageError(f"--template {template}: no such folder; give a copier template (a git "
                         "repository path or URL) like opgen's templates/team")
    if not path.is_dir():
        raise UsageError(f"--template {template}: not a folder; give a copier template (a git "
                         "repository path or URL) like opgen's templates/team")
    if not any((path / config).is_file() for config in ("copier.yml", "copier.yaml")):
        raise UsageError(f"--template {template}: not a copier template (no copier.yml); give "
                         "a team template like opgen's templates/team, not an op folder")


def _team_name(dest: Path) -> str:
    name = re.sub(r"[^a-z0-9_-]+", "-", dest.absolute().name.lower()).strip("-_")
    return name if re.match(r"[a-z]", name) else f"team-{name}".rstrip("-")


def _same_path(a: str, b: str) -> bool:
    return Path(a).expanduser().absolute() == Path(b).expanduser().absolute()


def _inside_git(folder: Path) -> bool:
    while not folder.exists():
        folder = folder.parent
    return _git("rev-parse", "--is-inside-work-tree", cwd=folder,
                check=False).strip() == "true"


def _toplevel(dest: Path) -> Path:
    top = _git("rev-parse", "--show-toplevel", cwd=dest, check=False).strip()
    if not top:
        raise TeamError(f"{dest}: not in a git repository; commit the team repository to git "
                        "first (updates are three-way merges over its history)")
    return Path(top).resolve()


def _git(*args: str, cwd: Path, check: bool = True) -> str:
    return _git_bytes(*args, cwd=cwd, check=check).decode(errors="replace")


def _git_bytes(*args: str, cwd: Path, check: bool = True) -> bytes:
    git = shutil.which("git")
    if git is None:
        raise TeamError("git is needed for team repositories and template versions, and it is "
                        "not on PATH; install git")
    proc = subprocess.run([git, *args], cwd=cwd, capture_output=True, check=False)
    if check and proc.returncode != 0:
        message = proc.stderr.decode(errors="replace").strip().splitlines() or ["no output"]
        command = next(a for a in args if not a.startswith("-") and "=" not in a)
        raise TeamError(f"git {command} failed in {cwd}: {message[-1]}")
    return proc.stdout
