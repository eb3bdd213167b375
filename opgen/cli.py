"""The ``opgen`` command line: a thin typer layer over :mod:`opgen.api`.

Each command parses its flags, calls one library function and prints the outcome. Any
:class:`~opgen.errors.OpgenError`, any wrong flag and any refusal of the file system (a full
disk, a read-only folder) becomes one ``error: ...`` line on stderr and a non-zero exit code;
never a traceback.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperCommand, TyperGroup

from . import __version__, api
from . import build as builder
from .errors import BuildError, OpgenError, UpdateConflictError
from .writer import Change, Status

if TYPE_CHECKING:
    from .bench import Case, Results, Row

class _FlagsTakeNoValue:
    """--help shows no value after a flag: typer 0.29 prints ``<bool>`` there, as if
    ``--cpu-only`` took one; an empty metavar prints nothing."""

    def get_params(self, ctx: typer.Context) -> list[Any]:
        params = super().get_params(ctx)  # type: ignore[misc]
        for param in params:
            if getattr(param, "is_flag", False) and param.metavar is None:
                param.metavar = ""
        return params


class _Command(_FlagsTakeNoValue, TyperCommand):
    pass


class _Group(_FlagsTakeNoValue, TyperGroup):
    pass


app = typer.Typer(
    cls=_Group,
    name="opgen",
    help="Generate, build, test and benchmark PaddlePaddle custom operators from a YAML spec.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
# Paths and names are the user's: printed as they are, never read as emoji codes (:fire:), and
# escaped (see _e) where a line also has markup.
out = Console(highlight=False, emoji=False, width=None if sys.stdout.isatty() else 150)
err = Console(stderr=True, highlight=False, emoji=False)

_STYLE = {Status.CREATE: "green", Status.OVERWRITE: "yellow", Status.IDENTICAL: "dim",
          Status.MERGED: "cyan", Status.CONFLICT: "bold red", Status.KEEP: "blue",
          Status.KEEP_DELETED: "blue", Status.REMOVE: "magenta"}


def _printable(value: object, *, lines: bool = False) -> str:
    """``value`` as one line of text: a line break or a terminal escape in a user's name or path
    is shown as Python writes it (``\\n``, ``\\x1b``), not sent to the terminal. ``lines``
    keeps line breaks (a build error's compiler lines and its log's path)."""
    text = str(value)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or (lines and c == "\n") else repr(c)[1:-1]
                   for c in text)


def _e(value: object) -> str:
    """``value`` as text that rich prints literally in a line with markup: ``ops[/x]`` stays."""
    return escape(_printable(value))


def _report(changes: list[Change], dest: Path, *, pretend: bool) -> None:
    verb = "would " if pretend else ""
    for change in changes:
        style = _STYLE[change.status]
        out.print(f"  [{style}]{verb}{change.status.value:>9}[/{style}]  {_e(dest / change.path)}")


def _path(text: str | Path) -> Path:
    """A path flag or argument as given. An empty one (most often an unset shell variable) is
    refused rather than read as the current folder, which is what ``Path("")`` is."""
    if isinstance(text, Path):  # a default
        return text
    if not text:
        raise typer.BadParameter("an empty path")
    return Path(text)


def _version(value: bool) -> None:
    if value:
        out.print(f"opgen {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version.")] = False,
) -> None:
    """opgen: a YAML op spec in, a built, tested and benchmarked Paddle custom op out."""


@app.command(cls=_Command)
def new(
    name: Annotated[str, typer.Argument(help="snake_case op name; the folder is DIR/NAME.")],
    elementwise: Annotated[bool, typer.Option("--elementwise", help="An elementwise op: "
                                              "math over elements, written in the spec.")] = False,
    rowwise: Annotated[bool, typer.Option("--rowwise", help="A row-wise op: reductions over "
                                          "the last axis (softmax, norms).")] = False,
    custom: Annotated[bool, typer.Option("--custom", help="A free-form op: you write the "
                                         "kernels and a numpy reference, opgen the rest.")] = False,
    directory: Annotated[Path | None, typer.Option("--dir", parser=_path, help="Where to "
                                                   "create NAME/ (default: here).")] = None,
    pretend: Annotated[bool, typer.Option("--pretend", help="Show what would be written.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Generate into an existing folder, as "
                                        "`opgen generate` does: an existing NAME.yaml is used, "
                                        "never overwritten, and your edits to generated files "
                                        "are merged.")] = False,
) -> None:
    """Scaffold NAME/NAME.yaml and the op generated from it: it builds and passes its tests."""
    chosen = [kind for kind, on in (("elementwise", elementwise), ("rowwise", rowwise),
                                    ("custom", custom)) if on]
    if len(chosen) != 1:
        raise typer.BadParameter("choose one op kind: --elementwise, --rowwise or --custom",
                                 param_hint="--elementwise / --rowwise / --custom")
    result = api.new(name, kind=chosen[0], directory=directory,
                     pretend=pretend, force=force)
    _report(result.changes, result.dest, pretend=pretend)
    _raise_on_conflicts(result, pretend=pretend)
    if not pretend:
        spec = result.dest / f"{name}.yaml"
        out.print(f"next: edit {spec}, then `opgen generate {spec}` and "
                  f"`opgen test {result.dest}`", markup=False)


@app.command(cls=_Command)
def generate(
    spec: Annotated[Path, typer.Argument(parser=_path,
                                         help="The op's YAML spec, or its folder.")],
    out_dir: Annotated[Path | None, typer.Option("--out", help="Output folder "
                                                 "(default: the spec's folder).",
                                                 parser=_path)] = None,
    pretend: Annotated[bool, typer.Option("--pretend", help="Show what would be written.")] = False,
    check: Annotated[bool, typer.Option("--check", help="Exit 1 if the files on disk differ "
                                        "from a fresh render (for CI).")] = False,
    allow_edits: Annotated[bool, typer.Option("--allow-edits", help="With --check: accept "
                                              "edits to generated files; only require that the "
                                              "op was regenerated since its spec changed and "
                                              "holds no merge conflicts.")] = False,
) -> None:
    """Render every file of the op described by SPEC, keeping your edits.

    Edited generated files are three-way merged with the last render; conflicts are marked,
    listed, and exit 1.
    """
    result = api.generate(spec, out_dir, pretend=pretend, check=check, allow_edits=allow_edits)
    if check:
        out.print(f"{result.dest}: up to date with {api.spec_in(spec).name} "
                  f"({len(result.changes)} files)",
                  markup=False)
        return
    _report(result.changes, result.dest, pretend=pretend)
    merged = [c.path for c in result.changes if c.status is Status.MERGED]
    if merged and not pretend:  # e.g. a custom op's kernels around a changed signature
        out.print(f"note: your edits to {', '.join(merged)} were merged with the new render; "
                  "check that they still fit the spec (kernel arguments, template parameters)",
                  markup=False)
    _raise_on_conflicts(result, pretend=pretend)


def _raise_on_conflicts(result: api.Result, *, pretend: bool) -> None:
    if result.conflicts:
        from .errors import ConflictError

        raise ConflictError(result.dest, result.conflicts, pretend=pretend)


@app.command(cls=_Command)
def build(
    op_dir: Annotated[Path, typer.Argument(parser=_path, help="The generated op's folder.")],
    cpu_only: Annotated[bool, typer.Option("--cpu-only",
                                           help="Leave out the CUDA sources.")] = False,
    arch: Annotated[str | None, typer.Option(
        "--arch", help="CUDA compute capabilities, e.g. 90 or 80,90 (default: the local GPUs', "
        "else 90).")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", help="Show the compiler output.")] = False,
    wheel: Annotated[bool, typer.Option("--wheel", help="Also package the compiled op as a wheel "
                                        "that installs and runs without the sources or opgen."
                                        )] = False,
    wheel_dir: Annotated[Path | None, typer.Option("--wheel-dir", help="Where --wheel writes "
                                                   "the wheel (default: OP_DIR/dist).",
                                                   parser=_path)] = None,
    wheel_version: Annotated[str | None, typer.Option("--wheel-version", help="The wheel's "
                                                      "version (default: 0.1.0+<build key>)."
                                                      )] = None,
) -> None:
    """Compile the op with paddle.utils.cpp_extension, cached by content.

    One process compiles a given build while others wait for it and load the result.
    """
    builder.parse_arches(arch)  # a wrong --arch is the one line, before the stale-spec warning
    _warn_if_stale(op_dir)
    result = api.build_op(op_dir, cpu_only=cpu_only, arch=arch, wheel=wheel, wheel_dir=wheel_dir,
                          wheel_version=wheel_version,
                          build_with=lambda config: _build(config, verbose=verbose),
                          status=lambda message: err.status(_e(message)))
    if arch is not None and not result.config.cuda:
        err.print(f"warning: --arch {_printable(arch)} had no effect: this build has no CUDA "
                  "part (Paddle here is CPU-only, or the op has no .cu source)", markup=False,
                  soft_wrap=True)
    if result.wheel is not None:
        out.print(f"{result.config.name}: wheel {result.wheel.path} ({result.wheel.summary()})",
                  markup=False, soft_wrap=True)


def _build(config: builder.BuildConfig, *, verbose: bool = False) -> builder.Built:
    """Build ``config`` (a spinner while compiling) and print one line saying what happened."""
    what = config.describe()
    if builder.built_library(config) is not None:
        built = builder.ensure_built(config)  # the cached build: nothing to wait for
    else:
        with err.status(f"compiling {_e(config.name)} ({_e(what)})..."):
            built = builder.ensure_built(config, verbose=verbose)
    if built.compiled:
        line = f"{config.name}: built ({what}) in {built.seconds:.1f} s: {built.library}"
    elif built.waited:
        line = (f"{config.name}: built by another process ({what}; waited "
                f"{built.seconds:.1f} s): {built.library}")
    else:
        line = f"{config.name}: up to date ({what}): {built.library}"
    out.print(line, markup=False, soft_wrap=True)  # paths stay whole, whatever the width
    return built


def _warn_if_stale(op_dir: Path) -> None:
    problem = api.stale_spec(op_dir)
    if problem is not None:
        err.print(f"warning: {_printable(problem)}", markup=False, soft_wrap=True)


class _PassThrough(_Command):
    """A command whose words after ``--`` are passed on (to pytest): click hands them over in
    ``ctx.args`` mixed with any stray word before ``--``, so their number is kept apart."""

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:
        ctx.meta["opgen.passed_on"] = len(args) - args.index("--") - 1 if "--" in args else 0
        return super().parse_args(ctx, args)


def _passed_on(ctx: typer.Context) -> list[str]:
    """The words after ``--``; a word before it that no parameter took is refused."""
    # OP_DIR itself may come after -- (`opgen test -- my_op -q`): then every extra word is
    # pytest's
    first = max(0, len(ctx.args) - ctx.meta.get("opgen.passed_on", 0))
    if first:
        raise typer.BadParameter(f"unexpected '{_printable(ctx.args[0])}': one op folder; "
                                 "pytest's own arguments go after --", param_hint="OP_DIR")
    return ctx.args


@app.command(cls=_PassThrough, context_settings={"allow_extra_args": True})
def test(
    ctx: typer.Context,
    op_dir: Annotated[Path, typer.Argument(parser=_path, help="The generated op's folder.")],
    device: Annotated[str, typer.Option("--device", help="cpu, gpu or all.")] = "all",
) -> None:
    """Build the op, then run its generated tests (extra arguments after -- go to pytest).

    A failed build stops here with its first error.
    """
    pytest_args = _passed_on(ctx)
    _warn_if_stale(op_dir)
    code = api.test(op_dir, device=device, pytest_args=pytest_args, build_with=_build)
    raise typer.Exit(code)


@app.command(cls=_Command)
def doctor(
    as_json: Annotated[bool, typer.Option("--json", help="Print the checks as JSON.")] = False,
) -> None:
    """Check Paddle, the GPUs, the CUDA toolkit and the compilers before a build fails."""
    from . import doctor as doc

    with err.status("checking the toolchain..."):
        checks = doc.run_checks()
    out.print(doc.report(checks, as_json=as_json, color=out.is_terminal), markup=False,
              highlight=False, soft_wrap=True)
    raise typer.Exit(doc.exit_code(checks))


def _sizes(text: str | None) -> list[int] | None:
    if text is None:
        return None
    if not text.strip():
        raise typer.BadParameter("empty; give sizes like 2^20,2^24, or leave it out",
                                 param_hint="--sizes")
    sizes = []
    for part in text.split(","):
        part = part.strip()
        size: int | None = None
        try:
            if part.startswith("2^"):
                exponent = int(part[2:])
                size = 2 ** min(exponent, 63) if exponent >= 0 else 0
            elif float(part).is_integer():
                size = int(float(part))
        except (ValueError, OverflowError):  # not a number; inf
            pass
        if size is None:
            raise typer.BadParameter(f"expected sizes like 1048576 or 2^20, got {part!r}",
                                     param_hint="--sizes")
        if not 0 < size < 2 ** 63:
            raise typer.BadParameter(f"{part}: a size is at least 1 and below 2^63 (int64)",
                                     param_hint="--sizes")
        sizes.append(size)
    return sizes


@app.command(cls=_Command)
def bench(
    op_dir: Annotated[Path, typer.Argument(parser=_path, help="The generated op's folder.")],
    device: Annotated[str, typer.Option("--device", help="cpu or gpu.")] = "cpu",
    sizes: Annotated[str | None, typer.Option("--sizes", help="Element counts, e.g. "
                                              "2^20,2^24,2^28.")] = None,
    shapes: Annotated[str | None, typer.Option(
        "--shapes", help="Instead of --sizes, one shape per input, broadcast like numpy: dims "
        "separated by x, inputs by :, cases by , (e.g. 16384x1024:1024,64x1x512:1x256x512); "
        "[] is a 0-D tensor.")] = None,
    dtype: Annotated[list[str] | None, typer.Option("--dtype", help="float32, float16, "
                                                    "bfloat16 or float64; repeatable.")] = None,
    repeats: Annotated[int, typer.Option("--repeats", help="Timed batches, 1 to 1000; the "
                                         "median is kept.")] = 5,
    compare: Annotated[str | None, typer.Option("--compare", help="What to time beside the "
                                                "op: any of copy, baseline, naive, or none; by "
                                                "default, those that apply to the op.",
                                                show_default=False)] = None,
    json_path: Annotated[Path | None, typer.Option("--json", help="Write the rows and "
                                                   "ratios as JSON.", parser=_path)] = None,
    plot_path: Annotated[Path | None, typer.Option("--plot", help="Draw GB/s against size "
                                                   "(with --shapes, per case) as a PNG.",
                                                   parser=_path)
                                      ] = None,
    per_call: Annotated[bool, typer.Option("--per-call/--no-per-call", help="Also time one "
                                           "call at 1, 1024 and 2^16 elements: the op, its raw "
                                           "API and the built-in.")] = True,
) -> None:
    """Time the op against a device copy, the spec's composed baseline and the naive kernel.

    What was measured is reported and written even when a later step fails.
    """
    import platform
    from datetime import datetime, timezone

    from . import bench as bench_lib

    if sizes and shapes:
        raise typer.BadParameter("give --sizes or --shapes, not both", param_hint="--shapes")
    if not 1 <= repeats <= 1000:  # 10^11 batches ran on for days
        raise typer.BadParameter(f"{repeats}: timed batches are 1 to 1000", param_hint="--repeats")
    kinds = None  # the default: what applies to the op's kind
    if compare is not None:
        words = [w.strip() for w in compare.split(",")]
        if "" in words or ("none" in words and len(words) > 1):
            raise typer.BadParameter(f"expected none, or any of copy, baseline and naive "
                                     f"separated by commas; got '{_printable(compare)}'",
                                     param_hint="--compare")
        kinds = tuple(w for w in words if w != "none")
    dtype = list(dict.fromkeys(dtype)) if dtype else dtype  # each timed once
    for path, flag in ((json_path, "--json"), (plot_path, "--plot")):
        if path is not None:
            bench_lib.check_output(path, flag)
    if json_path is not None and plot_path is not None and \
            json_path.resolve() == plot_path.resolve():
        raise typer.BadParameter(f"{_printable(plot_path)} is --json's file too; name two "
                                 "files", param_hint="--plot")
    if plot_path is not None:
        bench_lib.require_matplotlib()
    meta = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "device": device,
            "host": platform.node(), "command": "opgen " + " ".join(sys.argv[1:])}
    spec = bench_lib.op_spec(op_dir)  # a broken spec is the error, without the warning below
    rowwise = spec.name if spec.model.kind == "rowwise" else None
    cases = bench_lib.parse_shapes(shapes, rowwise) if shapes is not None else None
    _warn_if_stale(op_dir)
    results = bench_lib.Results()
    try:
        _measure(results, op_dir, device=device, sizes=_sizes(sizes), shapes=cases,
                 dtypes=dtype, repeats=repeats, compare=kinds, per_call=per_call, spec=spec)
    except (OpgenError, KeyboardInterrupt) as exc:
        if results.rows:  # keep what was measured, and say it is incomplete
            message = "interrupted" if isinstance(exc, KeyboardInterrupt) else str(exc)
            _bench_report(results, op_dir, device, meta, json_path, plot_path, error=message)
        raise
    _bench_report(results, op_dir, device, meta, json_path, plot_path)


def _measure(results: Results, op_dir: Path, *, device: str, sizes: list[int] | None,
             shapes: list[Case] | None, dtypes: list[str] | None, repeats: int,
             compare: tuple[str, ...] | None, per_call: bool = True,
             spec: Any = None) -> None:
    """Run the benchmark into ``results`` behind a progress bar on stderr."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    from . import bench as bench_lib

    def run(progress: Any) -> None:
        bench_lib.run(op_dir, device=device, sizes=sizes, shapes=shapes, dtypes=dtypes,
                      repeats=repeats, per_call=per_call, compare=compare, results=results,
                      progress=progress, spec=spec)

    if not err.is_terminal:
        # A log (CI, a job on a GPU machine): one line a step, as it starts, so a long build
        # reads as one and not as a hang (a bar is drawn only on a terminal).
        run(lambda msg, done, total: err.print(f"bench [{done + 1}/{total}] {_e(msg)}"))
        return
    with Progress(SpinnerColumn(), TextColumn("{task.description:<28}", markup=False), BarColumn(),
                  MofNCompleteColumn(), TimeElapsedColumn(), console=err,
                  transient=True) as bar:
        task = bar.add_task("benchmark", total=None)
        run(lambda msg, done, total: bar.update(task, description=msg, completed=done,
                                                total=total))


def _bench_report(results: Results, op_dir: Path, device: str, meta: dict[str, Any],
                  json_path: Path | None, plot_path: Path | None,
                  error: str | None = None) -> None:
    """Print the table and the skipped comparisons; write the JSON and the plot if asked."""
    from rich.table import Table

    from . import bench as bench_lib

    rows = results.rows
    table = Table(title=f"{_e(op_dir.resolve().name)} on {_e(device)}"
                  + (" (incomplete)" if error else ""))
    by_shapes = any(r.shapes is not None for r in rows)
    for column in (("dtype",) + (("shapes",) if by_shapes else ()) +
                   ("elements", "direction", "kernel", "time (ms)", "GB/s", "x copy",
                    "speedup vs baseline", "speedup vs naive")):
        table.add_column(column, justify="right")
    copy = {(r.dtype, r.size, r.shapes): r for r in rows if r.kernel == "copy"}
    summary = {(s["direction"], s["dtype"], s["size"], s.get("shapes")): s
               for s in bench_lib.ratios(rows)}
    order = list(dict.fromkeys(r.shapes for r in rows))  # --shapes cases in the order given

    def position(r: Row) -> tuple[int, int, int, int, bool]:
        dtype, direction = bench_lib.row_order(r)
        return dtype, order.index(r.shapes), r.size, direction, r.kernel != "op"

    for r in sorted(rows, key=position):
        c = copy.get((r.dtype, r.size, r.shapes))
        s = summary.get((r.direction, r.dtype, r.size, r.shapes)) if r.kernel == "op" else None
        fmt = lambda v: f"{v:.2f}x" if v else ""  # noqa: E731
        table.add_row(r.dtype, *((r.shapes or "",) if by_shapes else ()), f"{r.size:,}",
                      r.direction, r.kernel, f"{r.ms:.4f}", bench_lib.format_gbps(r.gbps),
                      fmt(r.gbps / c.gbps if c else None),
                      fmt(s and s["speedup_vs_baseline"]), fmt(s and s["speedup_vs_naive"]))
    out.print(table, width=max(out.width, 130))
    for skipped in results.skipped:
        out.print(f"note: {skipped.line()}", markup=False, soft_wrap=True)
    if results.calls:
        out.print(_per_call_table(results, op_dir), width=max(out.width, 130))
    if device == "gpu":
        meta["gpu"] = _gpu_name()
    if json_path:
        bench_lib.write_json(results, json_path, meta, error=error)
        out.print(f"wrote {json_path}" + (" (the rows measured before the failure)"
                                         if error else ""), markup=False)
    if plot_path:
        bench_lib.plot(rows, plot_path, op_dir.resolve().name)
        out.print(f"wrote {plot_path}", markup=False)


def _per_call_table(results: Results, op_dir: Path) -> Any:
    """The "per call" section: microseconds per call of the op, its raw API and the built-in at
    small sizes, and the op's ratios to them."""
    from rich.table import Table

    from . import bench as bench_lib

    entries = bench_lib.per_call_ratios(results.calls)
    calls = {c.entry: c.call for c in results.calls}
    table = Table(title=f"{_e(op_dir.resolve().name)} per call (float32, us, best of the "
                  "rounds)")
    for column in ("device", "elements", f"op: {calls.get('op', '')}",
                   f"raw API: {calls.get('raw', '')}", f"built-in: {calls.get('builtin', '-')}",
                   "op / built-in", "op / raw API"):
        table.add_column(_e(column), justify="right")
    us = lambda v: f"{v:.2f}" if v else "-"  # noqa: E731
    ratio = lambda v: f"{v:.2f}x" if v else "-"  # noqa: E731
    for e in entries:
        table.add_row(e["device"], f"{e['size']:,}", us(e.get("op")), us(e.get("raw")),
                      us(e.get("builtin")), ratio(e["op_over_builtin"]), ratio(e["op_over_raw"]))
    return table


def _gpu_name() -> str:
    import subprocess

    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                              capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        return "unknown"


@app.command(cls=_Command)
def init(
    team_dir: Annotated[Path, typer.Argument(parser=_path,
                                             help="The new team repository's folder.")],
    name: Annotated[str | None, typer.Option("--name", help="The team's name, lowercase "
                                             "(default: from the folder's name).")] = None,
    template: Annotated[str | None, typer.Option("--template", help="A copier template to "
                                                 "render instead of opgen's own (git repository "
                                                 "path or URL).")] = None,
    ref: Annotated[str | None, typer.Option("--ref", help="The template version (git tag) to "
                                            "render (default: the latest, or this opgen's).")
                   ] = None,
    opgen_requirement: Annotated[str | None, typer.Option(
        "--opgen-requirement", help="How the team repository installs opgen: a folder, a "
        "wheel, a URL (git+https://...) or a pip requirement (default: where this opgen was "
        "installed from).")] = None,
    pretend: Annotated[bool, typer.Option("--pretend", help="Show what would be written.")] = False,
) -> None:
    """Make a repository for one team's ops, from opgen's team template.

    pyproject, ops/ (relu6 first), CI, pre-commit and onboarding docs, rendered with copier.
    """
    from . import team

    result = team.init(team_dir, name=name, pretend=pretend, template=template, ref=ref,
                       requirement=opgen_requirement)
    verb = "would " if pretend else ""
    for rel in result.changed:
        out.print(f"  [green]{verb}create[/green]  {_e(result.dest / rel)}")
    requirement = result.opgen_requirement or ""
    local = " (a path on this machine: for CI elsewhere, --opgen-requirement " \
        "'opgen @ git+https://...')" if "file://" in requirement else ""
    out.print(f"installs opgen as: {requirement}{local}", markup=False, soft_wrap=True)
    if not pretend:
        out.print(f"{result.dest}: team repository, template version {result.version}. next: "
                  f"cd {result.dest}, commit it, then `bash ci/run.sh` and docs/onboarding.md",
                  markup=False)


@app.command(cls=_Command)
def update(
    team_dir: Annotated[Path, typer.Argument(parser=_path,
                                             help="The team repository.")] = Path("."),
    ref: Annotated[str | None, typer.Option("--ref", help="The template version (git tag) to "
                                            "move to (default: this opgen's).")] = None,
    pretend: Annotated[bool, typer.Option("--pretend", help="Show what would change.")] = False,
) -> None:
    """Move a team repository to a newer team template, keeping its local changes.

    A copier update: a three-way merge; conflicts are marked, listed, and exit 1.
    """
    from . import team

    result = team.update(team_dir, pretend=pretend, ref=ref)
    verb = "would " if pretend else ""
    for rel in result.changed:
        style, what = ("bold red", "conflict") if rel in result.conflicts else ("yellow", "update")
        out.print(f"  [{style}]{verb}{what:>8}[/{style}]  {_e(result.dest / rel)}")
    if result.conflicts:
        raise UpdateConflictError(result.dest, result.conflicts)
    out.print(f"{result.dest}: {'would be' if pretend else 'now'} at template version "
              f"{result.version}" + ("" if result.changed else " (nothing to change)")
              + ("; review with git diff, then commit" if result.changed and not pretend else ""),
              markup=False)
    for rel in result.changed:
        parts = Path(rel).parts
        if len(parts) == 3 and parts[0] == "ops" and parts[2] == f"{parts[1]}.yaml":
            out.print(f"next: the update changed a spec: opgen generate {result.dest / rel}",
                      markup=False)


def main(argv: list[str] | None = None) -> None:
    """Console entry point: runs the app and turns every user error into one line."""
    try:
        # Outside standalone mode click returns a command's typer.Exit code instead of exiting.
        code = app(args=argv, prog_name="opgen", standalone_mode=False)
        if isinstance(code, int) and code:
            sys.exit(code)
    except OpgenError as exc:
        text = _printable(exc, lines=isinstance(exc, BuildError))
        err.print(f"error: {text}", markup=False, soft_wrap=True)
        sys.exit(exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        err.print("error: aborted", markup=False)
        sys.exit(130)
    except typer.TyperException as exc:  # wrong flags and arguments: typer's (click's) errors
        ctx = getattr(exc, "ctx", None)
        where = f"{ctx.command_path}: " if ctx is not None else ""
        message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        if message:  # empty where the help was printed instead (`opgen` alone)
            err.print(f"error: {_printable(where + message)}", markup=False, soft_wrap=True)
        sys.exit(getattr(exc, "exit_code", 2) or 2)
    except KeyboardInterrupt:
        err.print("error: interrupted", markup=False)
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(1)
    except OSError as exc:  # the machine refused: a full disk, a read-only or forbidden folder
        err.print(f"error: {_printable(_os_error_text(exc))}", markup=False, soft_wrap=True)
        sys.exit(1)


def _os_error_text(exc: OSError) -> str:
    """``path: reason`` for an error of the file system (``[Errno 30] Read-only file system:
    '/x'`` as ``/x: read-only file system``)."""
    reason = exc.strerror or str(exc)
    reason = reason[:1].lower() + reason[1:]
    paths = [str(p) for p in (exc.filename, exc.filename2) if p is not None]
    return f"{' -> '.join(paths)}: {reason}" if paths else reason
