"""The library API behind the CLI: new, generate, build, test, load.

Every function takes plain arguments and raises :class:`~opgen.errors.OpgenError` for anything
the user can fix; the CLI only parses flags and prints.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import yaml

from . import __version__, build, journal, kinds, merge
from . import wheel as wheels
from .errors import DriftError, SpecError, UsageError, WriteError
from .merge import BASE_DIR
from .names import identifier_problem
from .render import Plan, render_op, templates_root
from .spec import Spec, load, loads
from .writer import (
    ANSWERS_FILE,
    Change,
    Status,
    apply,
    compare,
    locked,
    real_folder,
    recorded_answers,
    refuse_an_op_folder,
    refuse_an_unwritable_folder,
    sha256,
)


@dataclass(frozen=True)
class Result:
    """What a generate or new did (or, with ``pretend``, would do) to ``dest``."""

    dest: Path
    changes: list[Change]
    written: bool

    @property
    def conflicts(self) -> list[str]:
        """The files written (or, with ``pretend``, to be written) with conflict markers."""
        return [c.path for c in self.changes if c.status is Status.CONFLICT]


def _answers(spec: Spec, spec_bytes: bytes, generated: dict[str, bytes]) -> bytes:
    """The record of what produced the op: read back by later regenerations and by reviewers."""
    data = {
        "_note": "Written by opgen: what generated this op. Do not edit.",
        "opgen_version": __version__,
        "template": "op",  # the op templates (of the spec's kind), not the team template
        "spec": spec.path.name,
        "spec_sha256": sha256(spec_bytes),
        "base": f"{BASE_DIR}/",  # the last render of the files below, merged with edits next time
        "files": {path: sha256(data) for path, data in sorted(generated.items())},
    }
    return yaml.safe_dump(data, sort_keys=False).encode()


def _outputs(spec: Spec, spec_bytes: bytes, dest: Path) -> tuple[dict[str, bytes],
                                                                 dict[str, bytes]]:
    """The op's generated files, and opgen's bookkeeping beside them: the answers file and the
    base snapshot (a copy of the generated files, for the next regenerate's three-way merge)."""
    generated = dict(render_op(spec).files)
    if spec.path.resolve().parent != dest.resolve():
        generated[spec.path.name] = spec_bytes  # the op folder always carries its spec
    bookkeeping = {f"{BASE_DIR}/{rel}": data for rel, data in generated.items()}
    bookkeeping[ANSWERS_FILE] = _answers(spec, spec_bytes, generated)
    return generated, bookkeeping


def _shown(changes: list[Change]) -> list[Change]:
    """The changes worth printing: the base snapshot mirrors the generated files."""
    return [c for c in changes if not c.path.startswith(f"{BASE_DIR}/")]


def generate(spec_path: Path | str, out: Path | str | None = None, *, pretend: bool = False,
             check: bool = False, allow_edits: bool = False) -> Result:
    """Render the op of ``spec_path`` into ``out`` (default: the spec's folder), merging the new
    render with any edits made to the files generated last time (see :mod:`opgen.merge`).

    ``check`` compares a fresh render with the disk in memory and raises :class:`DriftError`
    listing the files that differ; with ``allow_edits`` it only requires that the op was
    regenerated since its spec last changed (its answers file and base snapshot are current) and
    holds no unresolved conflicts, whatever edits were made to generated files. Merge conflicts
    are written and listed in :attr:`Result.conflicts`; ``pretend`` reports every outcome and
    writes nothing.
    """
    if allow_edits and not check:
        raise UsageError("--allow-edits: only meaningful with --check")
    if check and pretend:
        raise UsageError("--check and --pretend: --check writes nothing already; give one")
    spec_path = spec_in(Path(spec_path))
    spec = load(spec_path)
    dest = Path(out) if out is not None else spec_path.parent
    flag = f"--out {dest}" if out is not None else None
    refuse_an_op_folder(dest, flag, writes=not (pretend or check))
    real = real_folder(dest)
    if real == real.parent:  # its lock file would go beside it
        raise UsageError(f"{flag or dest}: a filesystem root; an op needs a folder of its own")
    _refuse_another_op(dest, spec_path, "--out " + str(dest) if out is not None else str(dest))
    if pretend or check:
        _refuse_interrupted(dest, f"opgen generate {spec_path}")
    spec_bytes = spec_path.read_bytes()
    if check:
        generated, bookkeeping = _outputs(spec, spec_bytes, dest)
        if allow_edits:
            return _check_regenerated(generated, bookkeeping, dest, spec_path)
        user_files = kinds.get(spec.model.kind).user_owned(spec.model.name)
        return _check(Plan({**generated, **bookkeeping}), dest, spec_path, user_files)
    return _write_op(spec, spec_bytes, dest, pretend=pretend)


def _refuse_another_op(dest: Path, spec_path: Path, what: str) -> None:
    """``dest`` holds an op generated from another spec that is still there (the folder given
    by --out, or a second spec beside an op's own): writing would turn that op into this one.
    A spec renamed in place leaves no other behind, and its op is renamed."""
    recorded = recorded_answers(dest).get("spec")
    if isinstance(recorded, str) and recorded != spec_path.name and (dest / recorded).is_file():
        raise UsageError(f"{what}: holds the op generated from {recorded}; generating "
                         f"{spec_path.name} there would replace it: "
                         + ("name another folder" if what.startswith("--out") else
                            f"give {spec_path.name} a folder of its own"))


def stale_spec(op_dir: Path | str) -> str | None:
    """Why the op in ``op_dir`` is older than its spec (the spec changed since ``opgen
    generate`` last wrote the op from it), or None: a build then compiles the old sources."""
    folder = Path(op_dir)
    answers = recorded_answers(folder)
    spec_name, recorded = answers.get("spec"), answers.get("spec_sha256")
    if not (isinstance(spec_name, str) and isinstance(recorded, str)):
        return None
    try:
        if sha256((folder / spec_name).read_bytes()) == recorded:
            return None
    except OSError:
        return None
    return (f"{folder / spec_name} changed since the op was generated from it; this builds the "
            f"op as it was: run `opgen generate {folder}` first")


def spec_in(path: Path) -> Path:
    """``path`` itself, or for an op folder the spec its last render came from (its answers
    file's ``spec:``), else its one ``*.yaml`` file."""
    if not path.is_dir():
        return path
    recorded = recorded_answers(path).get("spec")
    if isinstance(recorded, str) and (path / recorded).is_file():
        return path / recorded
    specs = sorted(p for p in path.glob("*.yaml") if p.is_file())
    if len(specs) == 1:
        return specs[0]
    found = ", ".join(p.name for p in specs) if specs else "none"
    yml = [p.name for p in sorted(path.glob("*.yml")) if p.is_file() and p.name != ANSWERS_FILE]
    hint = f"; {', '.join(yml)}: a spec's name ends in .yaml" if yml and not specs else ""
    raise UsageError(f"{path}: a folder; name its spec (YAML files there: {found}{hint})")


def _write_op(spec: Spec, spec_bytes: bytes, dest: Path, *, pretend: bool,
              extra: dict[str, bytes] | None = None) -> Result:
    """Merge a fresh render of ``spec`` with the op in ``dest`` and write it (with ``extra``
    files beside it), all under the op's lock; ``pretend`` only reports."""
    generated, bookkeeping = _outputs(spec, spec_bytes, dest)
    # The spec itself may sit in the op folder: it is the input, never merged or removed.
    protect = [spec.path.resolve().relative_to(dest.resolve()).as_posix()] \
        if spec.path.resolve().is_relative_to(dest.resolve()) else []
    clash = [rel for rel in protect if rel in generated or rel in bookkeeping]
    if clash:
        raise UsageError(f"{spec.path}: the spec is named like a file the op is generated into "
                         f"({clash[0]}), which would then be left out; name it "
                         f"{spec.model.name}.yaml")
    _refuse_foreign_files(dest, generated, protect)
    with nullcontext() if pretend else locked(dest):
        update = merge.plan_update(dest, generated, bookkeeping, protect=protect)
        update = _spec_copy_as_is(update, dest, spec.path, generated)
        if not pretend:
            apply(Plan(update.files), dest, extra=extra, remove=update.remove)
    return Result(dest, update.changes, written=not pretend)


def _spec_copy_as_is(update: merge.Update, dest: Path, spec_path: Path,
                     generated: dict[str, bytes]) -> merge.Update:
    """The copy of the spec an ``--out`` folder carries is the spec, never a merge: an edited
    copy is refused (generating from the other spec would leave the op unlike the spec beside
    it, and ``--check`` failing from both), and a deleted one comes back."""
    rel = spec_path.name
    if rel not in generated:
        return update
    changes = []
    for change in update.changes:
        if change.path == rel and change.status in (Status.KEEP, Status.MERGED, Status.CONFLICT):
            problem = _spec_copy_problem(dest, rel, spec_path, generated[rel])
            if problem:
                raise UsageError(problem)
            change = Change(rel, Status.OVERWRITE)
        if change.path == rel and change.status is Status.KEEP_DELETED:
            change = Change(rel, Status.CREATE)
        changes.append(change)
    return merge.Update({**update.files, rel: generated[rel]}, update.remove, changes)


def _spec_copy_problem(dest: Path, rel: str, spec_path: Path, theirs: bytes) -> str | None:
    """Why the spec ``dest/rel`` may not be replaced by ``theirs``, ``spec_path``'s copy, or
    None where it says what the last copy or this one says (line endings aside)."""
    copy = dest / rel
    try:
        ours = copy.read_bytes()
    except OSError:
        return None  # gone, or a folder: the writer says so
    recorded = merge.load_base(dest)
    if rel not in recorded:  # the op there was generated from it, in place
        return (f"{copy}: the spec the op there was generated from, and not {spec_path}'s copy; "
                f"generate from it (`opgen generate {copy}`), or move it away to generate "
                f"{spec_path} there")
    if any(text is not None and _same_text(ours, text) for text in (recorded[rel], theirs)):
        return None
    return (f"{copy}: edited since opgen copied {spec_path} there; generate from it (`opgen "
            f"generate {copy}`), or delete it to take {spec_path} again")


def _same_text(a: bytes, b: bytes) -> bool:
    """Equal but for line endings (an editor's CRLF)."""
    return a.replace(b"\r\n", b"\n") == b.replace(b"\r\n", b"\n")


def _refuse_foreign_files(dest: Path, generated: dict[str, bytes], protect: list[str]) -> None:
    """``dest`` was never an op folder (no answers file, no base snapshot) and holds files the
    render would write, with other contents: a project's own README.md or setup.py. Merging
    would write conflict markers into them; a generated op needs a folder of its own. (An op
    folder that lost its answers file keeps its snapshot in .opgen/, and is merged.)"""
    if (dest / ANSWERS_FILE).exists() or (dest / BASE_DIR).exists():
        return
    clash = sorted(rel for rel, data in generated.items() if rel not in protect
                   and (dest / rel).is_file() and (dest / rel).read_bytes() != data)
    if clash:
        shown = ", ".join(clash[:4]) + (f" and {len(clash) - 4} more" if len(clash) > 4 else "")
        one = len(clash) == 1
        raise WriteError(f"{dest}: {shown} already exist{'s' if one else ''} and opgen did not "
                         f"write {'it' if one else 'them'} (this is not an op folder): generate "
                         "the op into a folder of its own (--out, or move the spec there)")


def _refuse_interrupted(dest: Path, command: str) -> None:
    """Reading ``dest`` without its lock would see a half-done update: say how to finish it."""
    left = journal.pending(real_folder(dest))
    if left is not None:
        raise WriteError(f"{dest}: an update of this op was interrupted ({left} is left); "
                         f"run `{command}` without --pretend or --check to finish it first")


def _check(plan: Plan, dest: Path, spec_path: Path,
           user_files: frozenset[str] = frozenset()) -> Result:
    """Every file as a fresh render writes it, except the user's own (``user_files``, such as a
    custom op's kernels): those may hold edits, while their base snapshot is current and they hold
    no merge conflict."""
    changes = compare(plan, dest)
    drift = [c for c in _shown(changes) if c.status is not Status.IDENTICAL
             and not _user_edit(c, dest, user_files)]
    stale_base = [c for c in changes if c.status is not Status.IDENTICAL
                  and c.path.startswith(f"{BASE_DIR}/")]
    if drift or stale_base:
        listing = [f"{c.path} ({_drift_reason(c, dest)})" for c in drift]
        if stale_base:
            listing.append(f"{BASE_DIR}/ ({len(stale_base)} files differ)")
        raise DriftError(f"{dest}: generated files differ from {spec_path.name}: "
                         f"{', '.join(listing)}")
    return Result(dest, _shown(changes), written=False)


def _user_edit(change: Change, dest: Path, user_files: frozenset[str]) -> bool:
    """``change`` is an edit of a user-owned file, with no merge conflict left in it."""
    return (change.path in user_files and change.status is Status.OVERWRITE
            and not merge.has_conflict_markers((dest / change.path).read_bytes()))


def _drift_reason(change: Change, dest: Path) -> str:
    if change.status is Status.CREATE:
        return "missing"
    target = dest / change.path
    if target.is_file() and merge.has_conflict_markers(target.read_bytes()):
        return "unresolved merge conflict"
    return "differs"


def _check_regenerated(generated: dict[str, bytes], bookkeeping: dict[str, bytes], dest: Path,
                       spec_path: Path) -> Result:
    stale = [c for c in compare(Plan(bookkeeping), dest) if c.status is not Status.IDENTICAL]
    unresolved = [rel for rel in sorted(generated) if (dest / rel).is_file()
                  and merge.has_conflict_markers((dest / rel).read_bytes())]
    copy = dest / spec_path.name  # the spec's copy, where the op is generated --out
    copy_differs = spec_path.name in generated and not (
        copy.is_file() and _same_text(copy.read_bytes(), generated[spec_path.name]))
    if stale or unresolved or copy_differs:
        problems = []
        if copy_differs:
            problems.append(f"its {spec_path.name} is not {spec_path}'s copy: generate from "
                            "one of the two")
        if stale:
            problems.append(f"not regenerated since {spec_path.name} (or opgen) changed: run "
                            f"`opgen generate {spec_path}`")
        if unresolved:
            problems.append(f"unresolved merge conflicts in {', '.join(unresolved)}")
        raise DriftError(f"{dest}: {'; '.join(problems)}")
    return Result(dest, _shown(compare(Plan(generated), dest)), written=False)


def new(name: str, *, kind: str = "elementwise", directory: Path | str | None = None,
        pretend: bool = False, force: bool = False) -> Result:
    """Scaffold ``<directory>/<name>/<name>.yaml`` and the op generated from it.

    ``force`` generates into an existing folder as :func:`generate` does: an existing spec is
    used, never overwritten, and edited generated files are merged, not replaced.
    """
    problem = identifier_problem(name, what="op")
    if problem:
        raise UsageError(problem)
    starting_spec = kinds.get(kind).starting_spec
    dest = Path(directory or ".") / name
    spec_path = dest / f"{name}.yaml"
    refuse_an_op_folder(dest, f"--dir {directory}" if directory is not None else None,
                        writes=not pretend)
    if dest.exists() and not force:
        raise WriteError(f"{dest} already exists; use --force to generate into it (an existing "
                         f"{spec_path.name} and your edits are kept)")
    if dest.is_dir():  # --force: not over an op of another name (a folder renamed, say)
        _refuse_another_op(dest, spec_path, str(dest))
    if pretend:
        _refuse_interrupted(dest, f"opgen new {name} --force")
    if spec_path.is_file():
        existing = load(spec_path)
        if existing.model.kind != kind:
            raise UsageError(f"{spec_path}: an op of kind {existing.model.kind}, which --force "
                             f"keeps as it is, not a new {kind} op: change its kind: there, or "
                             "use another folder")
        result = _write_op(existing, spec_path.read_bytes(), dest, pretend=pretend)
        return Result(dest, [Change(spec_path.name, Status.KEEP), *result.changes],
                      result.written)
    text = _scaffold_spec(name, starting_spec)
    try:
        spec = loads(text, spec_path)
    except SpecError as exc:  # the name: the spec it is in was not written
        raise UsageError(f"opgen new {name}: {exc.message}") from None
    result = _write_op(spec, text.encode(), dest, pretend=pretend,
                       extra={spec_path.name: text.encode()})
    return Result(dest, [Change(spec_path.name, Status.CREATE), *result.changes], result.written)


def _scaffold_spec(name: str, template: str) -> str:
    """The starting spec of a new op, from ``template`` (its kind's, under templates/)."""
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(templates_root())),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    return env.get_template(template).render(name=name)


@dataclass(frozen=True)
class Build:
    """What :func:`build_op` did: the configuration, its build, and the wheel when one was asked."""

    config: build.BuildConfig
    built: build.Built
    wheel: wheels.Wheel | None


def build_op(op_dir: Path | str, *, cpu_only: bool = False, arch: str | None = None,
             verbose: bool = False, wheel: bool = False, wheel_dir: Path | str | None = None,
             wheel_version: str | None = None,
             build_with: Callable[[build.BuildConfig], build.Built] | None = None,
             status: Callable[[str], AbstractContextManager[object]] | None = None) -> Build:
    """Compile the op in ``op_dir`` (cached by content) and, with ``wheel``, package it as a
    wheel in ``wheel_dir`` (default: ``op_dir/dist``) that installs without the sources.

    ``build_with`` compiles (default :func:`opgen.build.ensure_built`; the CLI adds a spinner);
    ``status(message)`` wraps the packaging, for a caller that shows progress. Wrong wheel flags
    are refused before anything compiles.
    """
    if not wheel and (wheel_dir or wheel_version):
        raise UsageError("--wheel-dir and --wheel-version go with --wheel")
    if cpu_only and arch is not None:
        raise UsageError("--arch: a --cpu-only build has no CUDA code; leave one of them out")
    wheels.check_version(wheel_version)  # before a compile, not after
    if wheel_dir is not None:
        refuse_an_unwritable_folder(Path(wheel_dir), f"--wheel-dir {wheel_dir}")
    config = build.configure(Path(op_dir), cpu_only=cpu_only, arches=build.parse_arches(arch))
    built = build_with(config) if build_with else build.ensure_built(config, verbose=verbose)
    if not wheel:
        return Build(config, built, None)
    with (status or (lambda _message: nullcontext()))(f"packaging {config.name}..."):
        package = wheels.build_wheel(config, built.library, wheel_dir or config.op_dir / "dist",
                                     version=wheel_version)
    return Build(config, built, package)


def test(op_dir: Path | str, *, device: str = "all", pytest_args: list[str] | None = None,
         build_with: Callable[[build.BuildConfig], object] = build.ensure_built) -> int:
    """Run the op's generated tests with pytest in a subprocess; return pytest's exit code.

    The op is built first with ``build_with`` (the build its wrapper loads: the default
    configuration), so a broken build stops here with its first error instead of failing every
    test. Files holding merge conflict markers are refused before anything runs, and so is
    ``device="gpu"`` where Paddle sees no GPU (with "all" the GPU's cases are reported skipped).
    """
    if device not in ("cpu", "gpu", "all"):
        raise UsageError(f"--device: expected cpu, gpu or all, got '{device}'")
    if device == "gpu":  # asked for the GPU alone: skipping every test would pass
        from .probe import paddle_info

        info = paddle_info()
        if info is None or info.gpu_count == 0:
            raise UsageError("--device gpu: no GPU visible to Paddle")
    config = build.configure(Path(op_dir))  # the folder, its conflict markers, the toolchain
    test_file = config.op_dir / f"test_{config.name}.py"
    if not test_file.exists():
        raise UsageError(f"{op_dir}: no {test_file.name}; run `opgen generate` first")
    build_with(config)
    env = {**os.environ, "OPGEN_TEST_DEVICES": device, "GLOG_minloglevel": "2"}
    cmd = [sys.executable, "-m", "pytest", str(test_file), "-p", "no:cacheprovider",
           "-p", "opgen.testing", *(pytest_args or [])]  # the plugin registers the markers
    return subprocess.call(cmd, env=env, cwd=config.op_dir)


def load_op(op_dir: Path | str, *, cpu_only: bool = False, arch: str | None = None,
            verbose: bool = False) -> ModuleType:
    """Build the op if needed and return its Python wrapper module (attribute ``<name>``).

    A merge conflict marker left in any file generated for the op (the wrapper included) is
    refused with :class:`~opgen.errors.MergeError` naming its line, before anything compiles or
    is imported."""
    config = build.configure(Path(op_dir), cpu_only=cpu_only, arches=build.parse_arches(arch))
    library = build.load_configured(config, verbose=verbose)
    name = config.name
    module_name = f"opgen_ops.{name}"
    if module_name in sys.modules:
        module = sys.modules[module_name]
    else:
        spec = importlib.util.spec_from_file_location(module_name, config.op_dir / f"{name}.py")
        if spec is None or spec.loader is None:
            raise UsageError(f"{op_dir}: no {name}.py wrapper; run `opgen generate` first")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    module._library = library  # type: ignore[attr-defined]
    return module
