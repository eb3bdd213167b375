"""The ``opgen`` command line: a thin typer layer over :mod:`opgen.api`.

Each command parses its flags, calls one library function and prints the outcome. Any
:class:`~opgen.errors.OpgenError`, and any wrong flag, becomes one ``error: ...`` line on stderr
and a non-zero exit code; never a traceback.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

from . import __version__, api
from .errors import OpgenError
from .writer import Change, Status

app = typer.Typer(
    name="opgen",
    help="Generate, build, test and benchmark PaddlePaddle custom operators from a YAML spec.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
out = Console(highlight=False, width=None if sys.stdout.isatty() else 150)
err = Console(stderr=True, highlight=False)

_STYLE = {Status.CREATE: "green", Status.OVERWRITE: "yellow", Status.IDENTICAL: "dim"}


def _report(changes: list[Change], dest: Path, *, pretend: bool) -> None:
    verb = "would " if pretend else ""
    for change in changes:
        style = _STYLE[change.status]
        out.print(f"  [{style}]{verb}{change.status.value:>9}[/{style}]  {dest / change.path}")


def _version(value: bool) -> None:
    if value:
        out.print(f"opgen {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[Optional[bool], typer.Option("--version", callback=_version,  # noqa: UP007
                                                    is_eager=True, help="Print the version.")] = None,
) -> None:
    """opgen: a YAML op spec in, a built, tested and benchmarked Paddle custom op out."""


@app.command()
def new(
    name: Annotated[str, typer.Argument(help="snake_case op name; the folder is DIR/NAME.")],
    elementwise: Annotated[bool, typer.Option("--elementwise", help="An elementwise op "
                                              "(the only kind so far).")] = False,
    directory: Annotated[Path, typer.Option("--dir", help="Where to create NAME/.")] = Path("."),
    pretend: Annotated[bool, typer.Option("--pretend", help="Show what would be written.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Write into an existing folder.")] = False,
) -> None:
    """Scaffold NAME/NAME.yaml and the op generated from it: it builds and passes its tests."""
    if not elementwise:
        raise typer.BadParameter("choose the op kind: --elementwise", param_hint="--elementwise")
    result = api.new(name, directory=directory, pretend=pretend, force=force)
    _report(result.changes, result.dest, pretend=pretend)
    if not pretend:
        out.print(f"next: edit {result.dest / (name + '.yaml')}, then "
                  f"`opgen generate {result.dest / (name + '.yaml')}` and `opgen test {result.dest}`")


@app.command()
def generate(
    spec: Annotated[Path, typer.Argument(help="The op's YAML spec.")],
    out_dir: Annotated[Optional[Path], typer.Option("--out", help="Output folder "  # noqa: UP007
                                                    "(default: the spec's folder).")] = None,
    pretend: Annotated[bool, typer.Option("--pretend", help="Show what would be written.")] = False,
    check: Annotated[bool, typer.Option("--check", help="Exit 1 if the files on disk differ "
                                        "from a fresh render (for CI).")] = False,
) -> None:
    """Render every file of the op described by SPEC."""
    result = api.generate(spec, out_dir, pretend=pretend, check=check)
    if check:
        out.print(f"{result.dest}: up to date with {spec.name} ({len(result.changes)} files)")
        return
    _report(result.changes, result.dest, pretend=pretend)


@app.command()
def build(
    op_dir: Annotated[Path, typer.Argument(help="The generated op's folder.")],
    cpu_only: Annotated[bool, typer.Option("--cpu-only", help="Leave out the CUDA sources.")] = False,
    arch: Annotated[Optional[str], typer.Option("--arch", help="CUDA compute capabilities, "  # noqa: UP007
                                                "e.g. 90 or 80,90 (default: the local GPUs).")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", help="Show the compiler output.")] = False,
) -> None:
    """Compile the op with paddle.utils.cpp_extension (cached by content)."""
    from . import build as builder

    config = builder.configure(op_dir, cpu_only=cpu_only, arches=builder.parse_arches(arch))
    what = "CPU + CUDA " + ",".join(f"sm_{a}" for a in config.arches) if config.cuda else "CPU"
    cached = builder.built_library(config)
    if cached is not None:
        out.print(f"{config.name}: up to date ({what}): {cached}")
        return
    with err.status(f"compiling {config.name} ({what})..."):
        library = builder.compile_library(config, verbose=verbose)
    out.print(f"{config.name}: built ({what}): {library}")


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def test(
    ctx: typer.Context,
    op_dir: Annotated[Path, typer.Argument(help="The generated op's folder.")],
    device: Annotated[str, typer.Option("--device", help="cpu, gpu or all.")] = "all",
) -> None:
    """Run the op's generated tests (extra arguments after -- go to pytest)."""
    code = api.test(op_dir, device=device, pytest_args=list(ctx.args))
    raise typer.Exit(code)


@app.command()
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
    if not text:
        return None
    sizes = []
    for part in text.split(","):
        part = part.strip()
        try:
            sizes.append(2 ** int(part[2:]) if part.startswith("2^") else int(float(part)))
        except ValueError:
            raise typer.BadParameter(f"expected sizes like 1048576 or 2^20, got {part!r}",
                                     param_hint="--sizes") from None
    if any(s <= 0 for s in sizes):
        raise typer.BadParameter("sizes must be positive", param_hint="--sizes")
    return sizes


@app.command()
def bench(
    op_dir: Annotated[Path, typer.Argument(help="The generated op's folder.")],
    device: Annotated[str, typer.Option("--device", help="cpu or gpu.")] = "cpu",
    sizes: Annotated[Optional[str], typer.Option("--sizes", help="Element counts, e.g. "  # noqa: UP007
                                                 "2^20,2^24,2^28.")] = None,
    dtype: Annotated[Optional[list[str]], typer.Option("--dtype", help="float32, float16, "  # noqa: UP007
                                                       "bfloat16 or float64; repeatable.")] = None,
    repeats: Annotated[int, typer.Option("--repeats", min=1, help="Timed batches; the median "
                                         "is kept.")] = 5,
    compare: Annotated[str, typer.Option("--compare", help="What to time beside the op: any of "
                                         "copy, baseline, naive, or none.")] = "copy,baseline,naive",
    json_path: Annotated[Optional[Path], typer.Option("--json", help="Write the rows and "  # noqa: UP007
                                                      "ratios as JSON.")] = None,
    plot_path: Annotated[Optional[Path], typer.Option("--plot", help="Draw GB/s against size "  # noqa: UP007
                                                      "as a PNG.")] = None,
) -> None:
    """Time the op against a device copy, the spec's composed baseline and the naive kernel."""
    import platform
    from datetime import datetime, timezone

    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
    from rich.table import Table

    from . import bench as bench_lib

    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                  console=err, transient=True) as progress:
        task = progress.add_task("benchmark")
        kinds = tuple(k.strip() for k in compare.split(",") if k.strip() not in ("", "none"))
        rows = bench_lib.run(op_dir, device=device, sizes=_sizes(sizes), dtypes=dtype,
                             repeats=repeats, compare=kinds,
                             progress=lambda msg: progress.update(task, description=msg))
    table = Table(title=f"{op_dir.resolve().name} on {device}")
    for column in ("dtype", "elements", "direction", "kernel", "time (ms)", "GB/s", "x copy",
                   "speedup vs baseline", "speedup vs naive"):
        table.add_column(column, justify="right")
    copy = {(r.dtype, r.size): r for r in rows if r.kernel == "copy"}
    summary = {(s["direction"], s["dtype"], s["size"]): s for s in bench_lib.ratios(rows)}
    for r in sorted(rows, key=lambda r: (r.dtype, r.size, r.direction, r.kernel != "op")):
        c = copy.get((r.dtype, r.size))
        s = summary.get((r.direction, r.dtype, r.size)) if r.kernel == "op" else None
        fmt = lambda v: f"{v:.2f}x" if v else ""  # noqa: E731
        table.add_row(r.dtype, f"{r.size:,}", r.direction, r.kernel, f"{r.ms:.4f}",
                      f"{r.gbps:,.0f}", fmt(r.gbps / c.gbps if c else None),
                      fmt(s and s["speedup_vs_baseline"]), fmt(s and s["speedup_vs_naive"]))
    out.print(table, width=max(out.width, 130))
    meta = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "device": device,
            "host": platform.node(), "command": "opgen " + " ".join(sys.argv[1:])}
    if device == "gpu":
        meta["gpu"] = _gpu_name()
    if json_path:
        bench_lib.write_json(rows, json_path, meta)
        out.print(f"wrote {json_path}")
    if plot_path:
        bench_lib.plot(rows, plot_path, op_dir.resolve().name)
        out.print(f"wrote {plot_path}")


def _gpu_name() -> str:
    import subprocess

    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                              capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        return "unknown"


def main(argv: list[str] | None = None) -> None:
    """Console entry point: runs the app and turns every user error into one line."""
    try:
        app(args=argv, standalone_mode=False)
    except OpgenError as exc:
        err.print(f"error: {exc}", markup=False, soft_wrap=True)
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
        err.print(f"error: {where}{message}", markup=False, soft_wrap=True)
        sys.exit(getattr(exc, "exit_code", 2) or 2)
    except KeyboardInterrupt:
        err.print("error: interrupted", markup=False)
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(1)
