"""``opgen bench``: time an op's forward and backward against a copy, a composed baseline and the
naive kernel, in one run, and report GB/s and ratios.

Method: inputs are made once per size and rotated through enough buffers to overflow the L2
cache; each measurement warms up, then times ``iters`` back-to-back calls between two device
synchronizations, repeated ``repeats`` times, and keeps the median. Bytes moved are what an
elementwise kernel must read and write: every input and every output once. With ``--shapes``
(inputs that broadcast) each input counts at its own shape and each output at the broadcast
shape, and the copy moves as many bytes as the forward.

On the GPU, Paddle's own kernels may not run (paddlepaddle-gpu 2.6.2 has none for sm_90), so the
copy and the composed baseline are measured with PyTorch on the same device, in a subprocess of
the same run. On the CPU they are Paddle's own ops.
"""

from __future__ import annotations

import ast
import builtins
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



Shape = tuple[int, ...]


@dataclass
class Row:
    """One timed kernel at one size (or case of ``--shapes``) and dtype."""

    kernel: str        # op, op-naive, copy, baseline
    direction: str     # forward or backward
    dtype: str
    size: int          # elements of each output (with --shapes, of the broadcast shape)
    bytes: int         # what this kernel read and wrote
    ms: float
    gbps: float
    shapes: str | None = None  # the --shapes case, as Case.label writes it; None with --sizes


@dataclass(frozen=True)
class Skipped:
    """A comparison kernel the framework could not run for one dtype (or a ``--shapes`` case,
    for every dtype), and why."""

    kernel: str
    dtype: str | None
    reason: str
    shapes: str | None = None

    def line(self) -> str:
        """One line for the report: ``baseline skipped for float16: <the framework's words>``."""
        where = " ".join(w for w in (self.dtype and f"for {self.dtype}",
                                     self.shapes and f"at {self.shapes}") if w)
        return f"{self.kernel} skipped {where}: {self.reason}"


def as_dict(item: Row | Skipped) -> dict[str, Any]:
    """A row or skipped comparison for JSON; ``shapes`` only where there is one, so that a
    ``--sizes`` run writes what it always has."""
    data = asdict(item)
    if data["shapes"] is None:
        del data["shapes"]
    return data


@dataclass(frozen=True)
class Case:
    """One problem to time: ``size`` elements for every input and output (``--sizes``), or one
    shape per input (``--shapes``), every output taking their broadcast shape."""

    size: int
    shapes: tuple[Shape, ...] | None = None

    @classmethod
    def of(cls, shapes: tuple[Shape, ...]) -> Case:
        """The case of one shape per input; :class:`UsageError` when they do not broadcast."""
        return cls(math.prod(broadcast_shape(shapes)), shapes)

    @property
    def label(self) -> str | None:
        """The shapes as ``--shapes`` takes them (``16384x1024:1024``), None for a size."""
        return None if self.shapes is None else ":".join(map(format_shape, self.shapes))

    @property
    def out_shape(self) -> Shape:
        return (self.size,) if self.shapes is None else broadcast_shape(self.shapes)

    def input_shapes(self, n_in: int) -> list[Shape]:
        return [(self.size,)] * n_in if self.shapes is None else list(self.shapes)

    def describe(self, dtype: str) -> str:
        """The step's name in progress and error lines: ``float32 n=1024`` or
        ``float32 16384x1024:1024``."""
        return f"{dtype} n={self.size}" if self.shapes is None else f"{dtype} {self.label}"


def format_shape(shape: Shape) -> str:
    """``16384x1024``; ``[]`` for a 0-D tensor."""
    return "x".join(map(str, shape)) if shape else "[]"


def broadcast_shape(shapes: tuple[Shape, ...] | list[Shape]) -> Shape:
    """The shape numpy broadcasts ``shapes`` to: aligned from the right, each dim equal or 1.
    :class:`UsageError` naming the two shapes and the dim when they do not broadcast."""
    label = ":".join(map(format_shape, shapes))
    result: Shape = ()
    for shape in shapes:
        rank = max(len(result), len(shape))
        a, b = (1,) * (rank - len(result)) + result, (1,) * (rank - len(shape)) + shape
        for k, (x, y) in enumerate(zip(a, b, strict=True)):
            if x != y and 1 not in (x, y):
                where = "the last dim" if k == rank - 1 else f"dim {k - rank} (from the right)"
                raise UsageError(f"--shapes {label}: {format_shape(result)} and "
                                 f"{format_shape(shape)} do not broadcast: {x} against {y} in "
                                 f"{where}; aligned from the right, each dim must be equal or 1")
        result = tuple(max(x, y) if 1 in (x, y) else x for x, y in zip(a, b, strict=True))
    return result


_SHAPES_EXAMPLE = "16384x1024:1024,64x1x512:1x256x512"


def _refuse_row_shapes(shapes: tuple[Shape, ...] | None, label: str | None, op: str) -> None:
    """A rowwise op's case is one shape of at least one dim: its per-element inputs'."""
    if shapes is None or len(shapes) != 1 or not shapes[0]:
        raise UsageError(f"--shapes {label}: {op} is a rowwise op: give one shape per case, its "
                         "per-element inputs' (rows x row length, e.g. 16384x1024)")


def parse_shapes(text: str, rowwise_op: str | None = None) -> list[Case]:
    """The cases of ``--shapes``: separated by commas, one shape per input separated by colons,
    dims by ``x`` (``16384x1024:1024``); a dim may be written ``2^k``, and ``[]`` or ``scalar``
    is a 0-D tensor; for the rowwise op ``rowwise_op``, one shape per case. :class:`UsageError`,
    one line naming the culprit, for anything else."""
    cases = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            raise UsageError(f"--shapes {text}: an empty case; expected cases like "
                             f"{_SHAPES_EXAMPLE}")
        shapes = tuple(_parse_shape(s.strip(), part) for s in part.split(":"))
        if rowwise_op is not None:  # before Case.of, whose broadcast error would come first
            _refuse_row_shapes(shapes, part, rowwise_op)
        cases.append(Case.of(shapes))
    return cases


def _parse_shape(text: str, case: str) -> Shape:
    if text in ("[]", "scalar"):
        return ()
    dims = []
    for dim in text.split("x"):
        power = dim[2:] if dim.startswith("2^") else None
        digits = dim if power is None else power
        if not (digits.isascii() and digits.isdigit()):
            shown = (f"an empty shape in {case!r}" if not text else
                     f"{text!r}" + (f" in {case!r}" if text != case else ""))
            raise UsageError(f"--shapes: {shown} is not a shape; expected dims separated by x, "
                             f"shapes by : and cases by , as in {_SHAPES_EXAMPLE} ([] for 0-D)")
        # 2^k with k past 62, or a long run of digits, is no size a tensor has: refused before
        # Python makes (or prints) a number of thousands of digits
        if (power is not None and int(power) > 62) or len(digits) > 19:
            raise UsageError(f"--shapes {case}: {text!r} has a dim of 2^63 or more (int64)")
        dims.append(2 ** int(power) if power is not None else int(dim))
        if dims[-1] <= 0:
            raise UsageError(f"--shapes {case}: {text!r} has a dim below 1")
    if math.prod(dims) >= 2 ** 63:
        raise UsageError(f"--shapes {case}: {text!r} has 2^63 elements or more (int64)")
    return tuple(dims)


def forward_elements(case: Case, n_in: int, n_out: int) -> int:
    """Elements a forward reads and writes: each input once at its own shape, each output at
    the broadcast shape."""
    return sum(math.prod(s) for s in case.input_shapes(n_in)) + n_out * math.prod(case.out_shape)


def copy_elements(case: Case, n_in: int, n_out: int) -> int:
    """Elements the copy baseline copies: ``size`` with ``--sizes`` (as it always has); with
    ``--shapes`` half the forward's elements, rounded up, so that it moves the forward's bytes."""
    return case.size if case.shapes is None else -(-forward_elements(case, n_in, n_out) // 2)


def backward_elements(case: Case, inputs: list[str], reads: list[str]) -> int:
    """Elements a backward reads and writes: each of ``reads`` at its own shape (a forward
    input's, else the broadcast shape: outputs and their gradients), and each input's gradient
    at the input's shape."""
    shapes = dict(zip(inputs, case.input_shapes(len(inputs)), strict=True))
    return (sum(math.prod(shapes.get(n, case.out_shape)) for n in reads)
            + sum(math.prod(s) for s in shapes.values()))


@dataclass
class Results:
    """What a benchmark measured so far: filled step by step, so that a failure (or Ctrl-C)
    part-way loses none of the rows already timed."""

    rows: list[Row] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    calls: list[CallRow] = field(default_factory=list)


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
    the inputs as its only names. Its builtins hold ``__import__`` alone: a framework function
    written in C that imports a module as it runs (``PyImport_Import``, as PyTorch's do on some
    machines) looks it up in the builtins of the frame that called it, which is the baseline's,
    and fails with ``KeyError: '__import__'`` without it. The checked tree cannot name it
    (:func:`opgen.expr.check_baseline` allows only the baseline's functions and symbols)."""
    scope = {"__builtins__": {"__import__": builtins.__import__}}
    return eval(code, {**scope, **functions, **attrs, **inputs})  # noqa: S307


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
    return {name: adapted[name] if name in adapted else _framework_function(fw, name)
            for name in BASELINE_FUNCTIONS}


def _framework_function(fw: Any, name: str) -> Callable[..., Any]:
    """``fw.<name>``, else ``fw.nn.functional.<name>`` (Paddle 2.6 has ``sigmoid`` only there);
    where neither has it, a function that fails when a baseline calls it, naming what is missing,
    so that baselines which do not call it still run."""
    for space in (fw, fw.nn.functional):
        function = getattr(space, name, None)
        if function is not None:
            return function

    def missing(*args: Any) -> Any:
        raise BenchError(f"the baseline calls {name}(), which {fw.__name__} "
                         f"{getattr(fw, '__version__', '')} has neither as {fw.__name__}.{name} "
                         f"nor as {fw.__name__}.nn.functional.{name}")
    return missing


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
        "gelu": fw.nn.functional.gelu,
        "gelu_tanh": (lambda u: fw.nn.functional.gelu(u, approximate="tanh")) if kind == "torch"
        else (lambda u: fw.nn.functional.gelu(u, approximate=True)),
        # over the last axis: what a model calls instead of a rowwise op
        "softmax": lambda u: fw.nn.functional.softmax(u, -1),
        "layer_norm": lambda u, w, b, eps: fw.nn.functional.layer_norm(u, [u.shape[-1]], w, b,
                                                                       eps),
        "rms_norm": (lambda u, w, eps: fw.nn.functional.rms_norm(u, [u.shape[-1]], w, eps))
        if kind == "torch" and hasattr(fw.nn.functional, "rms_norm")
        else (lambda u, w, eps: u * fw.rsqrt((u * u).mean(-1, keepdim=True) + eps) * w),
    }


def _rotation(nbytes: int) -> int:
    return max(1, min(16, math.ceil(L2_FLUSH_BYTES / max(nbytes, 1))))


def _dtype_size(dtype: str) -> int:
    return {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2}[dtype]


def _sample(rng: np.random.Generator, shape: Shape, domain: tuple[float, float]) -> np.ndarray:
    return rng.uniform(domain[0], domain[1], size=shape).astype(np.float32)


def bench_paddle(module: Any, name: str, shapes: list[Shape], domains: list[tuple[float, float]],
                 device: str, dtype: str, case: Case, *, nbytes: int, repeats: int, kernel: str,
                 backward_bytes: int | None = None, direction: str = "forward",
                 row_outputs: bool = False) -> list[Row]:
    """Time one op module's forward on inputs of ``shapes`` at one dtype, counting ``nbytes``
    (and, with ``backward_bytes``, the whole autograd step through ``paddle.grad``, as a training
    step sees it). :class:`BenchError` when an output's shape is not ``case.out_shape`` (or,
    with ``row_outputs``, that without its last dim: a rowwise op's per-row outputs)."""
    import paddle

    from .tensors import to_paddle

    op = getattr(module, name)
    sync = paddle.device.cuda.synchronize if device == "gpu" else (lambda: None)
    rng = np.random.default_rng(0)
    r = _rotation(nbytes)
    sets = [[to_paddle(_sample(rng, shape, d), dtype, device,
                       stop_gradient=backward_bytes is None)
             for shape, d in zip(shapes, domains, strict=True)] for _ in range(r)]
    _check_outputs(_outputs(op(*sets[0])), case, name, row_outputs=row_outputs)
    counter = [0]

    def forward() -> None:
        counter[0] += 1
        op(*sets[counter[0] % r])

    ms = time_it(forward, sync, iters=iterations(nbytes, device), repeats=repeats)
    rows = [Row(kernel, direction, dtype, case.size, nbytes, ms, nbytes / ms / 1e6, case.label)]
    if backward_bytes is not None:
        graphs = []
        for inputs in sets:
            outs = _outputs(op(*inputs))
            grads = [to_paddle(_sample(rng, tuple(o.shape), (-1.0, 1.0)),
                               str(o.dtype).removeprefix("paddle."), device) for o in outs]
            graphs.append((outs, inputs, grads))

        def backward_step() -> None:
            counter[0] += 1
            outs, inputs, grads = graphs[counter[0] % r]
            paddle.grad(outs, inputs, grad_outputs=grads, retain_graph=True)

        ms = time_it(backward_step, sync, iters=iterations(backward_bytes, device),
                     repeats=repeats)
        rows.append(Row(f"{kernel}-autograd", "backward", dtype, case.size, backward_bytes, ms,
                        backward_bytes / ms / 1e6, case.label))
    return rows


def _outputs(result: Any) -> list[Any]:
    return list(result) if isinstance(result, (tuple, list)) else [result]


def _check_outputs(outs: list[Any], case: Case, name: str, *, row_outputs: bool = False) -> None:
    """Refuse to time an op whose outputs do not have the case's (broadcast) shape: its bytes
    would be counted wrong."""
    for out in outs:
        if tuple(out.shape) != case.out_shape and not (
                row_outputs and tuple(out.shape) == case.out_shape[:-1]):
            raise BenchError(f"{name} returned shape {format_shape(tuple(out.shape))} for "
                             f"{case.label or case.size}; expected "
                             f"{format_shape(case.out_shape)}")


# -- per call -----------------------------------------------------------------------------------

#: The element counts of the "per call" section: where a call's fixed cost, not bandwidth, decides.
PER_CALL_SIZES = (1, 1024, 2**16)
PER_CALL_ENTRIES = ("op", "raw", "builtin")


@dataclass
class CallRow:
    """What one call costs at a small size, float32, best of the rounds: ``op`` (the generated
    wrapper), ``raw`` (the op's Python API that Paddle generates, attrs as the op takes them) or
    ``builtin`` (what a model calls instead: ``F.<name>`` where Paddle has one, else the spec's
    baseline; PyTorch's on the GPU)."""

    entry: str
    call: str      # what was called, as a model would write it
    device: str
    size: int
    us: float


def best_us(fn: Callable[[], Any], sync: Callable[[], None], *, calls: int,
            rounds: int) -> float:
    """Microseconds per call of ``fn``: the best of ``rounds`` batches of ``calls`` back-to-back
    calls and one synchronization (a busy machine only ever makes a batch slower)."""
    return best_us_each([fn], sync, calls=calls, rounds=rounds)[0]


def best_us_each(fns: list[Callable[[], Any]], sync: Callable[[], None], *, calls: int,
                 rounds: int) -> list[float]:
    """:func:`best_us` of each of ``fns``, taking turns: each round times one batch of each, so a
    busy spell of the machine falls on all of them rather than on one (their ratios are what the
    per-call table reports)."""
    for fn in fns:
        for _ in range(max(3, calls // 10)):
            fn()
    sync()
    best = [math.inf] * len(fns)
    for _ in range(rounds):
        for k, fn in enumerate(fns):
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            sync()
            best[k] = min(best[k], (time.perf_counter() - start) / calls)
    return [b * 1e6 for b in best]


def calls_per_round(size: int) -> int:
    """About 10-20 ms a batch on a CPU: 2000 calls of a few microseconds, fewer for 2^16."""
    return 2000 if size <= 4096 else 500


def builtin_call(spec: Any) -> str:
    """The built-in a model would call instead of the op, as text: ``F.<name>(inputs)`` when
    ``paddle.nn.functional`` has a function of the op's name, else the spec's baseline (None
    when there is neither)."""
    import paddle

    if callable(getattr(paddle.nn.functional, spec.name, None)):
        return f"F.{spec.name}({', '.join(spec.model.inputs)})"
    return spec.model.baseline


def _attr_args(spec: Any) -> list[Any]:
    """The attrs' defaults as the op's raw API takes them: a float as its double's 64 bits."""
    import struct

    return [struct.unpack("q", struct.pack("d", float(a.default)))[0] if a.type == "float"
            else a.default for a in spec.model.attrs.values()]


def bench_per_call_paddle(module: Any, spec: Any, device: str, *, sizes: tuple[int, ...],
                          rounds: int, builtin: bool) -> list[CallRow]:
    """The op through its wrapper and through its raw API (and, with ``builtin``, Paddle's
    built-in) at each of ``sizes`` elements, float32, on ``device``."""
    import paddle

    from .tensors import to_paddle

    m = spec.model
    sync = paddle.device.cuda.synchronize if device == "gpu" else (lambda: None)
    op = getattr(module, spec.name)
    raw = getattr(module._ops(), m.op_name)
    attrs = _attr_args(spec)
    text = builtin_call(spec) if builtin else None
    builtin_fn = getattr(paddle.nn.functional, spec.name) if text and text[:2] == "F." else None
    code = compile_baseline(spec.baseline) if text and builtin_fn is None else None
    defaults = {k: a.default for k, a in m.attrs.items()}
    rng = np.random.default_rng(0)
    domains = [m.domain.get(i, (-3.0, 3.0)) for i in m.inputs]
    names = ", ".join(m.inputs)

    def entries(inputs: list[Any]) -> list[tuple[str, str, Callable[[], Any]]]:
        found: list[tuple[str, str, Callable[[], Any]]] = [
            ("op", f"{spec.name}({names})", lambda: op(*inputs)),
            ("raw", f"{m.op_name}({', '.join([names, *m.attrs])})", lambda: raw(*inputs, *attrs)),
        ]
        if builtin_fn is not None:
            found.append(("builtin", str(text), lambda: builtin_fn(*inputs)))
        elif code is not None:
            ns = framework_namespace(paddle, inputs[0], "paddle")
            given = dict(zip(m.inputs, inputs, strict=True))
            found.append(("builtin", str(text),
                          lambda: evaluate_baseline(code, ns, defaults, given)))
        return found

    rows = []
    for size in sizes:
        inputs = [to_paddle(_sample(rng, (size,), d), "float32", device) for d in domains]
        found = entries(inputs)
        times = best_us_each([fn for _, _, fn in found], sync, calls=calls_per_round(size),
                             rounds=rounds)
        rows += [CallRow(entry, call, device, size, us)
                 for (entry, call, _), us in zip(found, times, strict=True)]
    return rows


def bench_per_call_torch(spec: Any, *, sizes: tuple[int, ...], rounds: int) -> list[CallRow]:
    """PyTorch's built-in (``torch.nn.functional.<name>`` where it has one, else the spec's
    baseline) per call on the GPU, in a subprocess as :func:`bench_torch_baselines`."""
    m = spec.model
    args = {"per_call": True, "name": spec.name, "baseline": m.baseline,
            "symbols": baseline_symbols(spec), "inputs": list(m.inputs),
            "attrs": {k: a.default for k, a in m.attrs.items()},
            "domains": [m.domain.get(i, (-3.0, 3.0)) for i in m.inputs],
            "sizes": list(sizes), "rounds": rounds}
    proc = subprocess.run([sys.executable, "-m", "opgen._torch_baseline", json.dumps(args)],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise UsageError(f"the PyTorch baseline failed (is torch installed with CUDA?): {tail}")
    return [CallRow(**r) for r in json.loads(proc.stdout.strip().splitlines()[-1])]


def per_call_ratios(calls: list[CallRow]) -> list[dict[str, Any]]:
    """One entry per device and size: each entry's microseconds, and the op's time over the
    built-in's and over the raw API's."""
    table: dict[tuple[str, int], dict[str, Any]] = {}
    for c in calls:
        entry = table.setdefault((c.device, c.size), {"device": c.device, "size": c.size})
        entry[c.entry] = c.us
        entry[f"{c.entry}_call"] = c.call
    for entry in table.values():
        op = entry.get("op")
        for other in ("builtin", "raw"):
            value = entry.get(other)
            entry[f"op_over_{other}"] = op / value if op and value else None
    return list(table.values())


class BaselineUnsupported(Exception):
    """Raised when the framework cannot run the composed baseline for a dtype (Paddle's CPU has
    no float16 ``tanh``, say); the message is the framework's own first line."""


def _paddle_inputs(domains: list[tuple[float, float]], dtype: str, shapes: list[Shape],
                   count: int) -> list[list[Any]]:
    """``count`` sets of CPU input tensors, one tensor per domain, of ``shapes``."""
    from .tensors import to_paddle

    rng = np.random.default_rng(0)
    return [[to_paddle(_sample(rng, shape, d), dtype, "cpu")
             for shape, d in zip(shapes, domains, strict=True)] for _ in range(count)]


def _case(case: Case | int) -> Case:
    return Case(case) if isinstance(case, int) else case


def bench_paddle_copy(dtype: str, case: Case | int, *, n_in: int = 1, n_out: int = 1,
                      repeats: int) -> Row:
    """A copy (``clone``) of :func:`copy_elements` elements with Paddle's own CPU op."""
    case = _case(case)
    n = copy_elements(case, n_in, n_out)
    copy_bytes = 2 * n * _dtype_size(dtype)
    r = _rotation(copy_bytes)
    sources = [inputs[0] for inputs in _paddle_inputs([(-1.0, 1.0)], dtype, [(n,)], r)]
    counter = [0]

    def copy() -> None:
        counter[0] += 1
        sources[counter[0] % r].clone()

    ms = time_it(copy, lambda: None, iters=iterations(copy_bytes, "cpu"), repeats=repeats)
    return Row("copy", "forward", dtype, case.size, copy_bytes, ms, copy_bytes / ms / 1e6,
               case.label)


def bench_paddle_baseline(baseline: ast.Expression, input_names: list[str], attrs: dict[str, Any],
                          n_out: int, domains: list[tuple[float, float]], dtype: str,
                          case: Case | int, *, repeats: int) -> Row:
    """The spec's composed baseline with Paddle's own CPU ops, on the case's shapes (Paddle
    broadcasts them itself); :class:`BaselineUnsupported` when Paddle cannot run it for
    ``dtype``."""
    import paddle

    case = _case(case)
    nbytes = forward_elements(case, len(input_names), n_out) * _dtype_size(dtype)
    r = _rotation(nbytes)
    sets = _paddle_inputs(domains, dtype, case.input_shapes(len(input_names)), r)
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
    return Row("baseline", "forward", dtype, case.size, nbytes, ms, nbytes / ms / 1e6,
               case.label)


def bench_torch_baselines(baseline: str | None, symbols: dict[str, str], input_names: list[str],
                          attrs: dict[str, Any], n_out: int, domains: list[tuple[float, float]],
                          dtypes: list[str], cases: list[Case], *, repeats: int) -> list[Row]:
    """Copy and composed baseline with PyTorch on the same GPU, in a subprocess of this run,
    which checks ``baseline`` against ``symbols`` again before it evaluates its tree."""
    args = {"baseline": baseline, "symbols": symbols, "inputs": input_names, "attrs": attrs,
            "n_out": n_out, "domains": domains, "dtypes": dtypes,
            "cases": [[c.size, c.shapes] for c in cases], "repeats": repeats}
    proc = subprocess.run([sys.executable, "-m", "opgen._torch_baseline", json.dumps(args)],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise UsageError(f"the PyTorch baseline failed (is torch installed with CUDA?): {tail}")
    return [Row(**r) for r in json.loads(proc.stdout.strip().splitlines()[-1])]


COMPARISONS = ("copy", "baseline", "naive")


def op_spec(op_dir: Path | str) -> Any:
    """The spec the bench of the op in ``op_dir`` reads (its baseline and dtypes): the
    folder's ``NAME.yaml`` as it is now."""
    from . import kinds  # noqa: F401  (registers each kind's spec rules)
    from .build import op_folder
    from .spec import load

    op_dir, name = op_folder(op_dir)
    return load(op_dir / f"{name}.yaml", check_builtins=False)


def run(op_dir: Path | str, *, device: str = "cpu", sizes: list[int] | None = None,
        shapes: list[Case] | None = None, dtypes: list[str] | None = None, repeats: int = 5,
        compare: tuple[str, ...] | None = None, per_call: bool = True,
        progress: Callable[[str, int, int], None] | None = None,
        results: Results | None = None, spec: Any = None) -> Results:
    """Benchmark the op in ``op_dir`` on ``device`` against the ``compare`` kernels (None: every
    one that applies to the op's kind; a rowwise op has no naive one), at
    ``sizes`` (element counts, every input and output that long) or at ``shapes`` (cases of
    :func:`parse_shapes`: one shape per input, broadcast), not both. With ``per_call``, then
    what one call costs at :data:`PER_CALL_SIZES` (float32): the op, its raw API and the built-in
    (``results.calls``).

    Rows are added to ``results`` (a new :class:`Results` unless given) as they are measured, so
    a caller that passes its own keeps them when a later step fails. A composed baseline the
    framework cannot run for a dtype is skipped (and listed in ``results.skipped``); any other
    failure of a step raises :class:`BenchError` naming the step. ``progress(description, done,
    total)`` is called before each step. ``spec`` is :func:`op_spec` of ``op_dir``, if read.
    """
    from .build import op_folder

    results = results if results is not None else Results()
    op_dir, name = op_folder(op_dir)
    spec = spec if spec is not None else op_spec(op_dir)
    m = spec.model
    if m.kind == "custom":
        raise UsageError(f"{op_dir}: opgen bench times elementwise and rowwise ops; a custom "
                         "op's kernels are yours to time (examples/embedding: "
                         "scripts/gpu/embedding_op.py)")
    if device not in ("cpu", "gpu"):
        raise UsageError(f"--device: expected cpu or gpu, got '{device}'")
    asked, compare = compare is not None, COMPARISONS if compare is None else compare
    unknown = set(compare) - set(COMPARISONS)
    if unknown:
        raise UsageError(f"--compare: unknown {', '.join(sorted(unknown))}; choose from "
                         f"{', '.join(COMPARISONS)}, or none")
    dtypes = dtypes or [d for d in ("float32", "float16", "bfloat16") if d in m.dtypes] or \
        list(m.dtypes)
    for d in dtypes:
        if "," in d:
            raise UsageError(f"--dtype {d}: one dtype a flag; repeat it (--dtype "
                             f"{d.split(',')[0].strip()} --dtype ...)")
        if d not in m.dtypes:
            raise UsageError(f"--dtype {d}: {name} is built for {', '.join(m.dtypes)}")
    if sizes and shapes:
        raise UsageError("--sizes and --shapes: give one of them")
    if m.kind == "rowwise":
        if sizes:
            raise UsageError(f"--sizes: {name} is a rowwise op; give its rows with --shapes, "
                             "e.g. --shapes 16384x1024,4096x4096 (rows x row length)")
        cases = [row_case(case, spec) for case in shapes or
                 [Case.of((s,)) for s in DEFAULT_ROW_SHAPES[device]]]
        if asked and "naive" in compare:  # the default has it, for the other kinds
            raise UsageError(f"--compare naive: {name} is a rowwise op, which has no naive "
                             "kernel to compare with; choose copy or baseline")
        compare = tuple(c for c in compare if c != "naive")  # no naive copy of a rowwise op
        per_call = False  # its per-call section times elementwise calls of one shape
    else:
        for case in shapes or []:
            check_case(case, list(m.inputs), name)
        cases = shapes or [Case(size) for size in sizes or DEFAULT_SIZES[device]]
        if asked and "naive" in compare and device == "cpu":
            raise UsageError("--compare naive: the naive kernel is a CUDA launch, timed with "
                             "--device gpu; on the CPU choose copy or baseline")
    cases = list(dict.fromkeys(cases))  # a case given twice is timed once
    plan = _Plan(spec, op_dir, device, cases, dtypes, repeats, set(compare), per_call)
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


#: Rows x row length that ``opgen bench`` times a rowwise op at by default: issue 13's anchors on
#: the GPU, a few smaller ones on the CPU.
DEFAULT_ROW_SHAPES: dict[str, list[Shape]] = {
    "gpu": [(4096, 4096), (16384, 1024), (65536, 256), (1024, 32768), (262144, 128)],
    "cpu": [(1024, 1024), (4096, 256), (64, 32768)],
}


def row_case(case: Case, spec: Any) -> Case:
    """A rowwise op's case from ``--shapes``: one shape, the per-element inputs' ``[*, C]``;
    each input then takes its role's shape (per-column ``[C]``, per-row ``[*, 1]``)."""
    _refuse_row_shapes(case.shapes, case.label, spec.name)
    shape = case.shapes[0]
    by_role = {"element": shape, "column": shape[-1:], "row": (*shape[:-1], 1)}
    return Case.of(tuple(by_role[spec.input_roles[n]] for n in spec.model.inputs))


def row_bytes(spec: Any, case: Case, dtype: str, names: list[str], roles: dict[str, str]) -> int:
    """Bytes of rowwise tensors ``names`` with ``roles`` (element, column, row, stat) at a case:
    per-row statistics in the math type (float32 for 16-bit types)."""
    shape = case.out_shape
    rows, cols = math.prod(shape[:-1]), shape[-1]
    item = _dtype_size(dtype)
    stat = 8 if dtype == "float64" else 4
    size = {"element": rows * cols * item, "column": cols * item, "row": rows * item,
            "stat": rows * stat}
    return sum(size[roles[n]] for n in names)


def check_case(case: Case, inputs: list[str], name: str) -> None:
    """:class:`UsageError` unless a ``--shapes`` case has one shape per input of the op."""
    if case.shapes is not None and len(case.shapes) != len(inputs):
        count = f"{len(inputs)} input" + ("s" if len(inputs) != 1 else "")
        got = f"{len(case.shapes)} shape" + ("s" if len(case.shapes) != 1 else "")
        raise UsageError(f"--shapes {case.label}: {name} takes {count} ({', '.join(inputs)}), "
                         f"one shape per input separated by ':'; got {got}")


@dataclass
class _Plan:
    """One benchmark run's settings, and the steps that measure it."""

    spec: Any
    op_dir: Path
    device: str
    cases: list[Case]
    dtypes: list[str]
    repeats: int
    compare: set[str]
    per_call: bool = True
    current: str = "starting"  #: the step running now, for error messages

    @property
    def rowwise(self) -> bool:
        return bool(self.spec.model.kind == "rowwise")

    def steps(self) -> int:
        on_gpu = self.device == "gpu"
        return (1 + len(self.dtypes) * len(self.cases)
                + (on_gpu and bool({"copy", "baseline"} & self.compare))
                + self.per_call * (1 + on_gpu))

    def measure(self, results: Results, step: Callable[[str], str]) -> None:
        """Build the op (and what it is compared with), then time every dtype and case."""
        from . import api, build

        spec, m, device = self.spec, self.spec.model, self.device
        cpu_only = device == "cpu"
        if device == "gpu":  # asked as `opgen test` asks: importing Paddle here would print
            from .probe import paddle_info  # its warnings before the error

            info = paddle_info()
            if info is None or info.gpu_count == 0:
                raise UsageError("--device gpu: no GPU visible to Paddle")
        # The op and the copies it is compared with are built at once, then loaded.
        backward_spec = backward_dir = naive_dir = None
        builds = ["the op"]
        if spec.backward is not None and not self.rowwise:
            backward_spec = _backward_spec(spec)
            backward_dir = _render_bench_op(backward_spec, self.op_dir)
            builds.append("its backward kernel as an op of its own")
        if device == "gpu" and "naive" in self.compare:
            naive_dir = _render_bench_op(_naive_spec(spec), self.op_dir, naive=True)
            builds.append("the naive comparison kernel")
        self.current = step("building " + (
            builds[0] if len(builds) == 1
            else ", ".join(builds[:-1]) + " and " + builds[-1] + ", at once"))
        build.compile_libraries([
            build.configure(op_dir, cpu_only=cpu_only and op_dir is not naive_dir)
            for op_dir in (self.op_dir, backward_dir, naive_dir) if op_dir is not None])
        module = api.load_op(self.op_dir, cpu_only=cpu_only)
        backward_op = None
        if backward_dir is not None:
            backward_op = _backward_op(spec, backward_spec, backward_dir, cpu_only=cpu_only)
        naive = api.load_op(naive_dir) if naive_dir is not None else None
        domains: list[tuple[float, float]] = [m.domain.get(i, (-3.0, 3.0)) for i in m.inputs]
        for dtype in self.dtypes:
            for case in self.cases:
                self.current = step(case.describe(dtype))
                if self.rowwise:
                    self._row_op_rows(results, module, domains, dtype, case)
                else:
                    self._op_rows(results, module, backward_op, naive, domains, dtype, case)
                if device == "cpu":
                    self._paddle_baselines(results, domains, dtype, case)
        if device == "gpu" and {"copy", "baseline"} & self.compare:
            self.current = step("PyTorch baselines on the same GPU")
            baseline = m.baseline if self._baseline() is not None else None
            results.rows += bench_torch_baselines(
                baseline, baseline_symbols(self.spec), list(m.inputs), self._attrs(),
                self._element_outputs(), domains, self.dtypes, self.cases, repeats=self.repeats)
        if self.per_call:
            self.current = step("per call")
            # On the GPU, Paddle 2.6's built-ins may have no kernels for the device (sm_90):
            # the built-in is PyTorch's there.
            results.calls += bench_per_call_paddle(
                module, spec, device, sizes=PER_CALL_SIZES, rounds=max(self.repeats, 7),
                builtin=device == "cpu")
            if device == "gpu":
                self.current = step("per call: PyTorch's built-in")
                results.calls += bench_per_call_torch(spec, sizes=PER_CALL_SIZES,
                                                      rounds=max(self.repeats, 7))

    def _op_rows(self, results: Results, module: Any, backward_op: _BackwardOp | None,
                 naive: Any, domains: list[tuple[float, float]], dtype: str, case: Case) -> None:
        """The op's forward (and autograd step), its backward kernel and the naive kernel at one
        dtype and case."""
        spec, m, size = self.spec, self.spec.model, _dtype_size(dtype)
        inputs, n_out = list(m.inputs), len(m.outputs)
        shapes = case.input_shapes(len(inputs))
        fwd_bytes = forward_elements(case, len(inputs), n_out) * size
        bwd_bytes = None
        if backward_op is not None:
            # --shapes counts what the backward reads; --sizes what it always has counted: the
            # inputs and the output gradients
            reads = (backward_op[3] if case.shapes is not None
                     else inputs + [f"grad_{o}" for o in m.outputs])
            bwd_bytes = backward_elements(case, inputs, reads) * size
        results.rows += bench_paddle(module, spec.name, shapes, domains, self.device, dtype,
                                     case, nbytes=fwd_bytes, repeats=self.repeats, kernel="op",
                                     backward_bytes=bwd_bytes)
        if backward_op is not None:
            module_b, name_b, domains_b, reads = backward_op
            if any(s != case.out_shape for s in shapes):
                self._skip_backward_kernel(results, case)
            else:
                results.rows += bench_paddle(
                    module_b, name_b, [case.out_shape] * len(reads), domains_b, self.device,
                    dtype, case, nbytes=backward_elements(case, inputs, reads) * size,
                    repeats=self.repeats, kernel="op", direction="backward")
        if naive is not None:
            results.rows += bench_paddle(naive, f"{spec.name}_naive", shapes, domains,
                                         self.device, dtype, case, nbytes=fwd_bytes,
                                         repeats=self.repeats, kernel="naive")

    def _row_op_rows(self, results: Results, module: Any, domains: list[tuple[float, float]],
                     dtype: str, case: Case) -> None:
        """A rowwise op's forward and autograd step at one dtype and case, counting every tensor
        each reads and writes once (per-row statistics in float32 for 16-bit types)."""
        from .kinds.rowwise import build_context

        spec, m = self.spec, self.spec.model
        roles = {**spec.input_roles, **{o: "element" if r == "element" else "stat"
                                        for o, r in spec.output_roles.items()}}
        fwd_bytes = row_bytes(spec, case, dtype, [*m.inputs, *m.outputs], roles)
        bwd_bytes = None
        backward = build_context(spec).backward
        if backward is not None:
            read = [t.name for t, r in zip(backward.tensors, backward.reads, strict=True) if r]
            roles.update({t.name: t.role for t in backward.tensors})
            bwd_bytes = row_bytes(spec, case, dtype, [*read, *m.inputs], roles)
        results.rows += bench_paddle(module, spec.name, case.input_shapes(len(m.inputs)),
                                     domains, self.device, dtype, case, nbytes=fwd_bytes,
                                     repeats=self.repeats, kernel="op",
                                     backward_bytes=bwd_bytes, row_outputs=True)

    def _skip_backward_kernel(self, results: Results, case: Case) -> None:
        """Once per case: the backward kernel alone computes each gradient at the broadcast
        shape; a broadcast input's gradient is then a reduction, which only the op's own
        backward (the autograd row) does."""
        if not any(s.kernel == "op backward" and s.shapes == case.label
                   for s in results.skipped):
            results.skipped.append(Skipped(
                "op backward", None, "an input is broadcast, so its gradient is a reduction "
                "that the backward kernel alone does not do; op-autograd times the whole "
                "backward", case.label))

    def _paddle_baselines(self, results: Results, domains: list[tuple[float, float]],
                          dtype: str, case: Case) -> None:
        """The CPU copy and composed baseline at one dtype and case; a baseline Paddle cannot
        run for ``dtype`` is skipped once, with the reason, for every case."""
        m = self.spec.model
        if "copy" in self.compare:
            results.rows.append(bench_paddle_copy(dtype, case, n_in=len(m.inputs),
                                                  n_out=self._element_outputs(),
                                                  repeats=self.repeats))
        baseline = self._baseline()
        if baseline is None or any(s.kernel == "baseline" and s.dtype == dtype
                                   for s in results.skipped):
            return
        try:
            results.rows.append(bench_paddle_baseline(
                baseline, list(m.inputs), self._attrs(), self._element_outputs(), domains, dtype,
                case, repeats=self.repeats))
        except BaselineUnsupported as exc:
            results.skipped.append(Skipped("baseline", dtype, f"Paddle cannot run it on the "
                                                              f"CPU: {exc}"))

    def _baseline(self) -> ast.Expression | None:
        """The checked tree of the spec's baseline, when it is compared."""
        return self.spec.baseline if "baseline" in self.compare else None

    def _element_outputs(self) -> int:
        """Outputs shaped like the case: all of an elementwise op's, a rowwise op's per-element
        ones (what its copy and baseline move)."""
        roles = self.spec.output_roles
        return sum(1 for o in self.spec.model.outputs if roles.get(o, "element") == "element")

    def _attrs(self) -> dict[str, Any]:
        return {k: a.default for k, a in self.spec.model.attrs.items()}


def _render_bench_op(spec: Any, op_dir: Path, *, naive: bool = False) -> Path:
    """Render ``spec``, a copy of the op made for the bench, under ``op_dir/build/bench``
    (``naive``: its CUDA kernels use the naive launcher); return its folder."""
    from .render import render_op
    from .writer import apply

    dest = op_dir / "build" / "bench" / spec.model.name
    apply(render_op(spec, naive=naive), dest)
    return dest


def _naive_spec(spec: Any) -> Any:
    """The op renamed, for the copy whose CUDA kernels use the naive launcher."""
    import dataclasses

    model = spec.model.model_copy(update={"name": f"{spec.name}_naive",
                                          "op_name": f"{spec.op_name}_naive"})
    return dataclasses.replace(spec, model=model)


#: The backward kernel as an op: its module, its name, its inputs' domains and its inputs.
_BackwardOp = tuple[Any, str, list[tuple[float, float]], list[str]]


def _backward_spec(spec: Any) -> Any:
    """The op's backward functor as the spec of a forward op of its own, so its kernel is timed
    without autograd's bookkeeping (which, in Paddle 2.6, also copies the output gradient)."""
    import dataclasses

    from .kinds.elementwise import build_context

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
        "inplace": {}, "amp": "follow",  # the op's own variants, not its backward's
    })
    return dataclasses.replace(spec, model=model, backward=None, backward_source={},
                               double_backward=None, double_backward_source={},
                               forward=renamed(spec.backward),
                               forward_source=renamed(spec.backward_source))


def _backward_op(spec: Any, backward_spec: Any, op_dir: Path, *, cpu_only: bool) -> _BackwardOp:
    """The backward op (``backward_spec``, rendered in ``op_dir``) loaded: its module, name,
    inputs' domains and inputs."""
    from . import api

    m, grad_inputs = spec.model, list(backward_spec.model.inputs)
    domains = [tuple(m.domain.get(n, (-3.0, 3.0))) if n in m.inputs or n in m.outputs
               else (-1.0, 1.0) for n in grad_inputs]
    return (api.load_op(op_dir, cpu_only=cpu_only), backward_spec.model.name, domains,
            grad_inputs)


# -- reporting ----------------------------------------------------------------------------------

def ratios(rows: list[Row]) -> list[dict[str, Any]]:
    """Each op row with its ratios to the copy (GB/s) and to the baselines (time)."""
    index = {(r.kernel, r.direction, r.dtype, r.size, r.shapes): r for r in rows}
    out = []
    for r in rows:
        if r.kernel != "op":
            continue
        entry = as_dict(r)
        copy = index.get(("copy", "forward", r.dtype, r.size, r.shapes))
        entry["x_copy"] = r.gbps / copy.gbps if copy else None
        for other in ("baseline", "naive"):
            o = index.get((other, r.direction, r.dtype, r.size, r.shapes))
            entry[f"speedup_vs_{other}"] = o.ms / r.ms if o else None
        out.append(entry)
    return out


def write_json(results: Results, path: Path, meta: dict[str, Any],
               error: str | None = None) -> None:
    """The rows, their ratios, the skipped comparisons and, when the run stopped early, why."""
    rows = results.rows
    data = {"meta": meta, "rows": [as_dict(r) for r in rows], "summary": ratios(rows),
            "skipped": [as_dict(s) for s in results.skipped],
            "per_call": per_call_ratios(results.calls), "error": error}
    _write(path, (json.dumps(data, indent=2) + "\n").encode())


def _write(path: Path, data: bytes) -> None:
    try:
        path.write_bytes(data)
    except OSError as exc:
        raise WriteError(f"{path}: cannot write: {exc.strerror or exc}") from None


#: The suffix each output flag writes; an existing file is replaced only where it has it.
OUTPUT_SUFFIXES = {"--json": ".json", "--plot": ".png"}


def check_output(path: Path, flag: str) -> None:
    """Refuse an output path that cannot be written, before minutes of measuring: a folder, a
    missing or read-only folder, and an existing file of another kind than the flag writes (the
    op's spec, a source), which would be lost."""
    if path.is_dir():
        raise UsageError(f"{flag} {path}: is a folder; name a file")
    folder = path.absolute().parent
    if not folder.is_dir():
        raise UsageError(f"{flag} {path}: no folder {folder}")
    suffix = OUTPUT_SUFFIXES.get(flag)
    if suffix and (path.exists() or path.is_symlink()) and path.suffix.lower() != suffix:
        raise UsageError(f"{flag} {path}: exists and is not a {suffix} file; {flag} would "
                         f"replace it (name a new file, or one ending in {suffix})")
    if flag == "--plot" and path.suffix.lower() != suffix:  # matplotlib: its format, by name
        raise UsageError(f"{flag} {path}: name a .png file (matplotlib picks the format by the "
                         "name's ending, and adds .png to a name without one)")
    from .writer import takes_an_entry

    if not takes_an_entry(folder):
        raise UsageError(f"{flag} {path}: the folder {folder} is not writable")


def require_matplotlib() -> None:
    """Raise a one-line error naming the extra to install when matplotlib is missing."""
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:
        raise UsageError("--plot needs matplotlib, which is not installed: "
                         "pip install 'opgen[plot]' (or pip install matplotlib)")


def format_gbps(gbps: float) -> str:
    """GB/s with at least three significant digits (a CPU moves 0.5 to 50 GB/s), whole numbers
    with thousands separators from 100 up (an H200's copy moves ~4,000)."""
    return f"{gbps:,.0f}" if gbps >= 100 else f"{gbps:.3g}"


#: The order tables and plots show dtypes in.
DTYPE_ORDER = ("float32", "float16", "bfloat16", "float64")


def row_order(row: Row) -> tuple[int, int]:
    """Where ``row`` goes among rows of one case: by dtype, the forward before the backward."""
    dtype = DTYPE_ORDER.index(row.dtype) if row.dtype in DTYPE_ORDER else len(DTYPE_ORDER)
    return dtype, row.direction != "forward"


def series_colours(rows: list[Row]) -> dict[str, str]:
    """One matplotlib colour per plotted series ("kernel direction"), the same in every panel:
    a copy drawn blue for float32 and orange for float16 read as two different kernels."""
    labels = sorted({f"{r.kernel} {r.direction}" for r in rows})
    return {label: f"C{i % 10}" for i, label in enumerate(labels)}


def plot(rows: list[Row], path: Path, title: str) -> None:
    """GB/s, one panel per dtype: against size, one line per kernel and direction; or, for
    ``--shapes``, one group of bars per case."""
    os.environ.setdefault("MPLBACKEND", "Agg")
    import matplotlib.pyplot as plt

    dtypes = sorted({r.dtype for r in rows}, key=DTYPE_ORDER.index)
    colour = series_colours(rows)
    by_shapes = any(r.shapes is not None for r in rows)
    width = 5 if not by_shapes else max(5, len({r.shapes for r in rows}) * 2)
    fig, axes = plt.subplots(1, len(dtypes), figsize=(width * len(dtypes), 4), squeeze=False)
    for ax, dtype in zip(axes[0], dtypes, strict=True):
        series: dict[str, list[Row]] = {}
        for r in rows:
            if r.dtype == dtype:
                series.setdefault(f"{r.kernel} {r.direction}", []).append(r)
        if by_shapes:
            _bars(ax, series, colour)
        else:
            for label, points in sorted(series.items()):
                points.sort(key=lambda r: r.size)
                ax.plot([p.size for p in points], [p.gbps for p in points], marker="o",
                        label=label, color=colour[label])
            ax.set_xscale("log", base=2)
            ax.set_xlabel("elements")
        # log: a CPU's op and baseline run at a tenth of its copy's GB/s, an H200's small sizes
        # at a hundredth of its large ones; a linear axis flattens them against zero
        ax.set_yscale("log")
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


def _bars(ax: Any, series: dict[str, list[Row]], colour: dict[str, str]) -> None:
    """One group of bars per ``--shapes`` case (in the order measured), one bar per series."""
    cases = list(dict.fromkeys(r.shapes for points in series.values() for r in points))
    step = 0.8 / max(len(series), 1)
    for i, (label, points) in enumerate(sorted(series.items())):
        gbps = {p.shapes: p.gbps for p in points}
        xs = [k + (i - (len(series) - 1) / 2) * step for k, c in enumerate(cases) if c in gbps]
        ax.bar(xs, [gbps[c] for c in cases if c in gbps], width=step, label=label,
               color=colour[label])
    ax.set_xticks(range(len(cases)), [str(c) for c in cases], fontsize=8)
    ax.set_xlabel("input shapes")
