"""``opgen bench``: time an op's forward and backward against a copy, a composed baseline and the
naive kernel, in one run, and report GB/s and ratios.

Method: inputs are made once per size and rotated through enough buffers to overflow the L2
cache; each measurement warms up, then times ``iters`` back-to-back calls between two device
synchronizations, repeated ``repeats`` times, and keeps the median. Bytes moved are what an
elementwise kernel must read and write: every input and every output once.

On the GPU, Paddle's own kernels may not run (paddlepaddle-gpu 2.6.2 has none for sm_90), so the
copy and the composed baseline are measured with PyTorch on the same device, in a subprocess of
the same run. On the CPU they are Paddle's own ops.
"""

from __future__ import annotations

import ast
import json
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import CodeType
from typing import Any

import numpy as np

from .errors import BenchError, OpgenError, UsageError, WriteError
from .expr import BASELINE_FUNCTIONS

L2_FLUSH_BYTES = 256 * 2**20
DEFAULT_SIZES = {"gpu": [2**16, 2**20, 2**24, 2**26, 2**28], "cpu": [2**12, 2**16, 2**20, 2**22]}



@dataclass
class Row:
    """One timed kernel at one size and dtype."""

    kernel: str        # op, op-naive, copy, baseline
    direction: str     # forward or backward
    dtype: str
    size: int
    bytes: int
    ms: float
    gbps: float


@dataclass(frozen=True)
class Skipped:
    """A comparison kernel the framework could not run for one dtype, and why."""

    kernel: str
    dtype: str
    reason: str

    def line(self) -> str:
        """One line for the report: ``baseline skipped for float16: <the framework's words>``."""
        return f"{self.kernel} skipped for {self.dtype}: {self.reason}"


@dataclass
class Results:
    """What a benchmark measured so far: filled step by step, so that a failure (or Ctrl-C)
    part-way loses none of the rows already timed."""

    rows: list[Row] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)


def first_line(exc: BaseException) -> str:
    """An exception as one line: its type, unless the message names it, and its first line."""
    lines = str(exc).strip().splitlines()
    message = lines[0].strip() if lines else ""
    return message if message.startswith("(") else f"{type(exc).__name__}: {message}".rstrip(": ")


def time_it(fn: Callable[[], Any], sync: Callable[[], None], *, iters: int, repeats: int,
            warmup: int = 3) -> float:
    """Median milliseconds per call of ``fn`` over ``repeats`` timed batches of ``iters`` calls."""
    for _ in range(warmup):
        fn()
    sync()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(iters):
            fn()
        sync()
        samples.append((time.perf_counter() - start) * 1e3 / iters)
    return statistics.median(samples)


def iterations(nbytes: int, device: str) -> int:
    """Enough calls that one timed batch lasts ~20 ms on the device, at least 5."""
    bandwidth = 4e12 if device == "gpu" else 5e9
    return max(5, min(2000, int(0.02 * bandwidth / max(nbytes, 1))))


def compile_baseline(tree: ast.Expression) -> CodeType:
    """The checked tree of a spec's ``baseline:`` (:attr:`opgen.spec.Spec.baseline`), compiled;
    nothing else is ever evaluated."""
    return compile(tree, "<baseline>", "eval")


def evaluate_baseline(code: CodeType, functions: dict[str, Any], attrs: dict[str, Any],
                      inputs: dict[str, Any]) -> Any:
    """Run a compiled baseline with ``functions`` (:func:`framework_namespace`), the attrs and
    the inputs as its only names: no builtins."""
    return eval(code, {"__builtins__": {}, **functions, **attrs, **inputs})  # noqa: S307


def baseline_symbols(spec: Any) -> dict[str, str]:
    """The names a spec's baseline reads, with their types: its inputs and attrs."""
    m = spec.model
    return {**{n: "num" for n in m.inputs},
            **{n: "num" if a.type in ("int", "int64", "float") else a.type
               for n, a in m.attrs.items()}}


def framework_namespace(fw: Any, like: Any, kind: str) -> dict[str, Any]:
    """The baseline functions for ``fw`` (paddle or torch): one per name of
    :data:`opgen.expr.BASELINE_FUNCTIONS`, the framework's function of that name unless
    :func:`_adapted` wraps it. Numbers become 0-D tensors of ``like``'s dtype, so a chain like
    clip(maximum(x, 0), 0, t) launches what a model would."""
    adapted = _adapted(fw, like, kind)
    return {name: adapted[name] if name in adapted else getattr(fw, name)
            for name in BASELINE_FUNCTIONS}


def _adapted(fw: Any, like: Any, kind: str) -> dict[str, Any]:
    """The baseline functions whose framework call differs from ``fw.<name>(*args)``."""
    def t(v: Any) -> Any:
        if isinstance(v, (int, float)):
            if kind == "torch":
                return fw.tensor(v, dtype=like.dtype, device=like.device)
            return fw.full([], v, dtype=like.dtype)
        return v
    return {
        "clip": fw.clamp if kind == "torch" else fw.clip,
        "maximum": lambda a, b: fw.maximum(t(a), t(b)),
        "minimum": lambda a, b: fw.minimum(t(a), t(b)),
        "where": lambda c, a, b: fw.where(c, t(a), t(b)),
        "pow": lambda a, b: fw.pow(t(a), b),
        "softplus": fw.nn.functional.softplus,
    }


def _rotation(nbytes: int) -> int:
    return max(1, min(16, math.ceil(L2_FLUSH_BYTES / max(nbytes, 1))))


def _dtype_size(dtype: str) -> int:
    return {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2}[dtype]


def _sample(rng: np.random.Generator, n: int, domain: tuple[float, float]) -> np.ndarray:
    return rng.uniform(domain[0], domain[1], size=n).astype(np.float32)


def bench_paddle(module: Any, name: str, n_in: int, n_out: int, domains: list[tuple[float, float]],
                 device: str, dtype: str, size: int, *, repeats: int, kernel: str,
                 backward: bool, direction: str = "forward") -> list[Row]:
    """Time one op module's forward at one size and dtype (and, with ``backward``, the whole
    autograd step through ``paddle.grad``, as a training step sees it)."""
    import paddle

    from .tensors import to_paddle

    op = getattr(module, name)
    sync = paddle.device.cuda.synchronize if device == "gpu" else (lambda: None)
    rng = np.random.default_rng(0)
    fwd_bytes = (n_in + n_out) * size * _dtype_size(dtype)
    r = _rotation(fwd_bytes)
    sets = [[to_paddle(_sample(rng, size, d), dtype, device, stop_gradient=not backward)
             for d in domains] for _ in range(r)]
    it = iterations(fwd_bytes, device)
    counter = [0]

    def forward() -> None:
        counter[0] += 1
        op(*sets[counter[0] % r])

    ms = time_it(forward, sync, iters=it, repeats=repeats)
    rows = [Row(kernel, direction, dtype, size, fwd_bytes, ms, fwd_bytes / ms / 1e6)]
    if backward:
        graphs = []
        for inputs in sets:
            outs = op(*inputs)
            outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
            grads = [to_paddle(_sample(rng, size, (-1.0, 1.0)), dtype, device) for _ in outs]
            graphs.append((outs, inputs, grads))
        bwd_bytes = (n_in + n_out + n_in) * size * _dtype_size(dtype)

        def backward_step() -> None:
            counter[0] += 1
            outs, inputs, grads = graphs[counter[0] % r]
            paddle.grad(outs, inputs, grad_outputs=grads, retain_graph=True)

        ms = time_it(backward_step, sync, iters=iterations(bwd_bytes, device), repeats=repeats)
        rows.append(Row(f"{kernel}-autograd", "backward", dtype, size, bwd_bytes, ms,
                        bwd_bytes / ms / 1e6))
    return rows


class BaselineUnsupported(Exception):
    """Raised when the framework cannot run the composed baseline for a dtype (Paddle's CPU has
    no float16 ``tanh``, say); the message is the framework's own first line."""


def _paddle_inputs(domains: list[tuple[float, float]], dtype: str, size: int,
                   count: int) -> list[list[Any]]:
    """``count`` sets of CPU input tensors, one tensor per domain."""
    from .tensors import to_paddle

    rng = np.random.default_rng(0)
    return [[to_paddle(_sample(rng, size, d), dtype, "cpu") for d in domains]
            for _ in range(count)]


def bench_paddle_copy(dtype: str, size: int, *, repeats: int) -> Row:
    """A copy (``clone``) of ``size`` elements with Paddle's own CPU op."""
    copy_bytes = 2 * size * _dtype_size(dtype)
    r = _rotation(copy_bytes)
    sources = [inputs[0] for inputs in _paddle_inputs([(-1.0, 1.0)], dtype, size, r)]
    counter = [0]

    def copy() -> None:
        counter[0] += 1
        sources[counter[0] % r].clone()

    ms = time_it(copy, lambda: None, iters=iterations(copy_bytes, "cpu"), repeats=repeats)
    return Row("copy", "forward", dtype, size, copy_bytes, ms, copy_bytes / ms / 1e6)


def bench_paddle_baseline(baseline: ast.Expression, input_names: list[str], attrs: dict[str, Any],
                          n_out: int, domains: list[tuple[float, float]], dtype: str, size: int,
                          *, repeats: int) -> Row:
    """The spec's composed baseline with Paddle's own CPU ops; :class:`BaselineUnsupported`
    when Paddle cannot run it for ``dtype``."""
    import paddle

    nbytes = (len(input_names) + n_out) * size * _dtype_size(dtype)
    r = _rotation(nbytes)
    sets = _paddle_inputs(domains, dtype, size, r)
    code = compile_baseline(baseline)
    ns = framework_namespace(paddle, sets[0][0], "paddle")
    counter = [0]

    def composed() -> None:
        counter[0] += 1
        evaluate_baseline(code, ns, attrs,
                          dict(zip(input_names, sets[counter[0] % r], strict=True)))

    try:
        composed()  # the first call: a dtype Paddle has no kernel for fails here
    except Exception as exc:  # noqa: BLE001 - whatever Paddle raises, the baseline cannot run
        raise BaselineUnsupported(first_line(exc)) from exc
    ms = time_it(composed, lambda: None, iters=iterations(nbytes, "cpu"), repeats=repeats)
    return Row("baseline", "forward", dtype, size, nbytes, ms, nbytes / ms / 1e6)


def bench_torch_baselines(baseline: str | None, symbols: dict[str, str], input_names: list[str],
                          attrs: dict[str, Any], n_out: int, domains: list[tuple[float, float]],
                          dtypes: list[str], sizes: list[int], *, repeats: int) -> list[Row]:
    """Copy and composed baseline with PyTorch on the same GPU, in a subprocess of this run,
    which checks ``baseline`` against ``symbols`` again before it evaluates its tree."""
    args = {"baseline": baseline, "symbols": symbols, "inputs": input_names, "attrs": attrs,
            "n_out": n_out,
            "domains": domains, "dtypes": dtypes, "sizes": sizes, "repeats": repeats}
    proc = subprocess.run([sys.executable, "-m", "opgen._torch_baseline", json.dumps(args)],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise UsageError(f"the PyTorch baseline failed (is torch installed with CUDA?): {tail}")
    return [Row(**r) for r in json.loads(proc.stdout.strip().splitlines()[-1])]


COMPARISONS = ("copy", "baseline", "naive")


def run(op_dir: Path | str, *, device: str = "cpu", sizes: list[int] | None = None,
        dtypes: list[str] | None = None, repeats: int = 5,
        compare: tuple[str, ...] = COMPARISONS,
        progress: Callable[[str, int, int], None] | None = None,
        results: Results | None = None) -> Results:
    """Benchmark the op in ``op_dir`` on ``device`` against the ``compare`` kernels.

    Rows are added to ``results`` (a new :class:`Results` unless given) as they are measured, so
    a caller that passes its own keeps them when a later step fails. A composed baseline the
    framework cannot run for a dtype is skipped (and listed in ``results.skipped``); any other
    failure of a step raises :class:`BenchError` naming the step. ``progress(description, done,
    total)`` is called before each step.
    """
    from .build import find_op
    from .spec import load

    results = results if results is not None else Results()
    op_dir = Path(op_dir).resolve()
    name = find_op(op_dir)
    spec = load(op_dir / f"{name}.yaml", check_builtins=False)
    m = spec.model
    if device not in ("cpu", "gpu"):
        raise UsageError(f"--device: expected cpu or gpu, got '{device}'")
    unknown = set(compare) - set(COMPARISONS)
    if unknown:
        raise UsageError(f"--compare: unknown {', '.join(sorted(unknown))}; choose from "
                         f"{', '.join(COMPARISONS)}")
    dtypes = dtypes or [d for d in ("float32", "float16", "bfloat16") if d in m.dtypes] or \
        list(m.dtypes)
    for d in dtypes:
        if d not in m.dtypes:
            raise UsageError(f"--dtype {d}: {name} is built for {', '.join(m.dtypes)}")
    plan = _Plan(spec, op_dir, device, sizes or DEFAULT_SIZES[device], dtypes, repeats,
                 set(compare))
    steps = plan.steps()
    done = [0]

    def step(message: str) -> str:
        if progress is not None:
            progress(message, done[0], steps)
        done[0] += 1
        return message

    try:
        plan.measure(results, step)
    except (OpgenError, KeyboardInterrupt):
        raise
    except Exception as exc:  # noqa: BLE001 - Paddle's and PyTorch's errors, as one line
        raise BenchError(f"{plan.current}: {first_line(exc)}") from exc
    return results


@dataclass
class _Plan:
    """One benchmark run's settings, and the steps that measure it."""

    spec: Any
    op_dir: Path
    device: str
    sizes: list[int]
    dtypes: list[str]
    repeats: int
    compare: set[str]
    current: str = "starting"  #: the step running now, for error messages

    def steps(self) -> int:
        on_gpu = self.device == "gpu"
        return (1 + (self.spec.backward is not None) + (on_gpu and "naive" in self.compare)
                + len(self.dtypes) * len(self.sizes)
                + (on_gpu and bool({"copy", "baseline"} & self.compare)))

    def measure(self, results: Results, step: Callable[[str], str]) -> None:
        """Build the op (and what it is compared with), then time every dtype and size."""
        from . import api

        spec, m, device = self.spec, self.spec.model, self.device
        self.current = step("building the op")
        module = api.load_op(self.op_dir, cpu_only=device == "cpu")
        backward_op = None
        if spec.backward is not None:
            self.current = step("building the backward kernel as an op of its own")
            backward_op = _backward_module(spec, self.op_dir, cpu_only=device == "cpu")
        naive = None
        if device == "gpu":
            import paddle

            if not (paddle.device.is_compiled_with_cuda() and paddle.device.cuda.device_count()):
                raise UsageError("--device gpu: no GPU visible to Paddle")
            if "naive" in self.compare:
                self.current = step("building the naive comparison kernel")
                naive = _naive_module(spec, self.op_dir)
        domains: list[tuple[float, float]] = [m.domain.get(i, (-3.0, 3.0)) for i in m.inputs]
        n_in, n_out = len(m.inputs), len(m.outputs)
        for dtype in self.dtypes:
            for size in self.sizes:
                self.current = step(f"{dtype} n={size}")
                results.rows += bench_paddle(module, spec.name, n_in, n_out, domains, device,
                                             dtype, size, repeats=self.repeats, kernel="op",
                                             backward=spec.backward is not None)
                if backward_op is not None:
                    module_b, name_b, domains_b = backward_op
                    results.rows += bench_paddle(module_b, name_b, len(domains_b), n_in,
                                                 domains_b, device, dtype, size,
                                                 repeats=self.repeats, kernel="op",
                                                 backward=False, direction="backward")
                if naive is not None:
                    results.rows += bench_paddle(naive, f"{spec.name}_naive", n_in, n_out,
                                                 domains, device, dtype, size,
                                                 repeats=self.repeats, kernel="naive",
                                                 backward=False)
                if device == "cpu":
                    self._paddle_baselines(results, domains, dtype, size)
        if device == "gpu" and {"copy", "baseline"} & self.compare:
            self.current = step("PyTorch baselines on the same GPU")
            baseline = m.baseline if self._baseline() is not None else None
            results.rows += bench_torch_baselines(
                baseline, baseline_symbols(self.spec), list(m.inputs), self._attrs(), n_out,
                domains, self.dtypes, self.sizes, repeats=self.repeats)

    def _paddle_baselines(self, results: Results, domains: list[tuple[float, float]],
                          dtype: str, size: int) -> None:
        """The CPU copy and composed baseline at one dtype and size; a baseline Paddle cannot
        run for ``dtype`` is skipped once, with the reason, for every size."""
        if "copy" in self.compare:
            results.rows.append(bench_paddle_copy(dtype, size, repeats=self.repeats))
        baseline = self._baseline()
        if baseline is None or any(s.kernel == "baseline" and s.dtype == dtype
                                   for s in results.skipped):
            return
        m = self.spec.model
        try:
            results.rows.append(bench_paddle_baseline(
                baseline, list(m.inputs), self._attrs(), len(m.outputs), domains, dtype, size,
                repeats=self.repeats))
        except BaselineUnsupported as exc:
            results.skipped.append(Skipped("baseline", dtype, f"Paddle cannot run it on the "
                                                              f"CPU: {exc}"))

    def _baseline(self) -> ast.Expression | None:
        """The checked tree of the spec's baseline, when it is compared."""
        return self.spec.baseline if "baseline" in self.compare else None

    def _attrs(self) -> dict[str, Any]:
        return {k: a.default for k, a in self.spec.model.attrs.items()}


def _naive_module(spec: Any, op_dir: Path) -> Any:
    """Render and build a copy of the op whose CUDA kernels use the naive launcher."""
    import dataclasses

    from . import api
    from .render import render_op
    from .writer import apply

    model = spec.model.model_copy(update={"name": f"{spec.name}_naive",
                                          "op_name": f"{spec.op_name}_naive"})
    naive_spec = dataclasses.replace(spec, model=model)
    dest = op_dir / "build" / "bench" / model.name
    apply(render_op(naive_spec, naive=True), dest)
    return api.load_op(dest)


def _backward_module(spec: Any, op_dir: Path, *, cpu_only: bool) -> tuple[Any, str, list]:
    """Build the op's backward functor as a forward op of its own, so its kernel is timed without
    autograd's bookkeeping (which, in Paddle 2.6, also copies the output gradient)."""
    import dataclasses

    from . import api
    from .kinds.elementwise import build_context
    from .render import render_op
    from .writer import apply

    m = spec.model
    grad_inputs = build_context(spec).backward.inputs
    outputs = [f"grad_{i}" for i in m.inputs]

    def renamed(entries: dict[str, Any]) -> dict[str, Any]:  # intermediates keep their names
        return {f"grad_{k}" if k in m.inputs else k: v for k, v in entries.items()}

    model = m.model_copy(update={
        "name": f"{spec.name}_backward", "op_name": f"{spec.op_name}_backward",
        "inputs": grad_inputs, "outputs": outputs,
        "forward": renamed(spec.backward_source), "backward": None,
        "domain": {n: m.domain[n] for n in grad_inputs if n in m.domain},
    })
    derived = dataclasses.replace(spec, model=model, backward=None, backward_source={},
                                  forward=renamed(spec.backward),
                                  forward_source=renamed(spec.backward_source))
    dest = op_dir / "build" / "bench" / model.name
    apply(render_op(derived), dest)
    domains = [tuple(m.domain.get(n, (-3.0, 3.0))) if n in m.inputs or n in m.outputs
               else (-1.0, 1.0) for n in grad_inputs]
    return api.load_op(dest, cpu_only=cpu_only), model.name, domains


# -- reporting ----------------------------------------------------------------------------------

def ratios(rows: list[Row]) -> list[dict[str, Any]]:
    """Each op row with its ratios to the copy (GB/s) and to the baselines (time)."""
    index = {(r.kernel, r.direction, r.dtype, r.size): r for r in rows}
    out = []
    for r in rows:
        if r.kernel != "op":
            continue
        entry = asdict(r)
        copy = index.get(("copy", "forward", r.dtype, r.size))
        entry["x_copy"] = r.gbps / copy.gbps if copy else None
        for other in ("baseline", "naive"):
            o = index.get((other, r.direction, r.dtype, r.size))
            entry[f"speedup_vs_{other}"] = o.ms / r.ms if o else None
        out.append(entry)
    return out


def write_json(results: Results, path: Path, meta: dict[str, Any],
               error: str | None = None) -> None:
    """The rows, their ratios, the skipped comparisons and, when the run stopped early, why."""
    rows = results.rows
    data = {"meta": meta, "rows": [asdict(r) for r in rows], "summary": ratios(rows),
            "skipped": [asdict(s) for s in results.skipped], "error": error}
    _write(path, (json.dumps(data, indent=2) + "\n").encode())


def _write(path: Path, data: bytes) -> None:
    try:
        path.write_bytes(data)
    except OSError as exc:
        raise WriteError(f"{path}: cannot write: {exc.strerror or exc}") from None


def check_output(path: Path, flag: str) -> None:
    """Refuse an output path that cannot be written, before minutes of measuring."""
    if path.is_dir():
        raise UsageError(f"{flag} {path}: is a folder; name a file")
    if not path.absolute().parent.is_dir():
        raise UsageError(f"{flag} {path}: no folder {path.absolute().parent}")


def require_matplotlib() -> None:
    """Raise a one-line error naming the extra to install when matplotlib is missing."""
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:
        raise UsageError("--plot needs matplotlib, which is not installed: "
                         "pip install 'opgen[plot]' (or pip install matplotlib)")


def plot(rows: list[Row], path: Path, title: str) -> None:
    """GB/s against size, one line per kernel and direction, one panel per dtype."""
    os.environ.setdefault("MPLBACKEND", "Agg")
    import matplotlib.pyplot as plt

    dtypes = sorted({r.dtype for r in rows}, key=lambda d: ["float32", "float16", "bfloat16",
                                                            "float64"].index(d))
    fig, axes = plt.subplots(1, len(dtypes), figsize=(5 * len(dtypes), 4), squeeze=False)
    for ax, dtype in zip(axes[0], dtypes, strict=True):
        series: dict[str, list[Row]] = {}
        for r in rows:
            if r.dtype == dtype:
                series.setdefault(f"{r.kernel} {r.direction}", []).append(r)
        for label, points in sorted(series.items()):
            points.sort(key=lambda r: r.size)
            ax.plot([p.size for p in points], [p.gbps for p in points], marker="o", label=label)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("elements")
        ax.set_ylabel("GB/s (bytes read + written)")
        ax.set_title(f"{title} {dtype}")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=120)
    except OSError as exc:
        raise WriteError(f"{path}: cannot write: {exc.strerror or exc}") from None
    finally:
        plt.close(fig)
