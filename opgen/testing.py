"""Helpers for the tests opgen generates: devices, dtypes, tolerances, data in and out of Paddle.

Everything crosses to the device by host-to-device copies and is compared with numpy on the host,
and output gradients are always passed explicitly: on a GPU whose arch the installed Paddle has no
kernels for (paddlepaddle-gpu 2.6.2 on an sm_90 H200), Paddle's own ops write nothing, but copies
and custom ops work. So no helper here runs a built-in Paddle op on the GPU.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import pytest

# Re-exported: generated tests call them as ``ot.place``, ``ot.to_paddle``, ``ot.to_numpy``.
from .tensors import place as place
from .tensors import to_numpy as to_numpy
from .tensors import to_paddle as to_paddle

#: (rtol, atol) of an op's result against the float64 numpy reference, per dtype.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-10, 1e-12),
    "float32": (1e-5, 1e-6),
    "float16": (1e-3, 1e-3),
    "bfloat16": (1e-2, 1e-2),
}

#: Shapes every generated test runs: empty, 0-D, one element, an odd tail, several dims.
SHAPES: list[tuple[int, ...]] = [(0,), (), (1,), (1000003,), (3, 5, 7), (2, 0, 3)]


def gpu_available() -> bool:
    import paddle

    return bool(paddle.device.is_compiled_with_cuda() and paddle.device.cuda.device_count() > 0)


def paddle_kernels_run(device: str) -> bool:
    """Whether Paddle's own kernels compute on ``device``: paddlepaddle-gpu 2.6.2 has no code for
    sm_90, so on an H200 its ops silently leave outputs unwritten while custom ops work."""
    import paddle

    if device == "cpu":
        return True
    x = paddle.to_tensor(np.ones(4, np.float32), place=place(device))
    return bool(np.array_equal((x + x).numpy(), np.full(4, 2.0, np.float32)))


@contextlib.contextmanager
def auto_cast(device: str, level: str, dtype: str) -> Iterator[None]:
    """``paddle.amp.auto_cast(level=level, dtype=dtype)`` on ``device``. On the CPU Paddle's
    auto_cast sets no AMP state ("amp_guard can only be enabled on CUDAPlace", Paddle 3.3.1 and
    2.6.2), so there this sets the state it sets on a GPU (the tracer's AMP level and dtype) for
    the ops' wrappers to read; Paddle's own ops still cast nothing on the CPU."""
    import paddle

    if device != "cpu":
        with paddle.amp.auto_cast(level=level, dtype=dtype):
            yield
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with paddle.amp.auto_cast(level=level, dtype=dtype):  # its module state, nothing more
            tracer = paddle.base.framework._dygraph_tracer()
            saved = tracer._amp_level, tracer._amp_dtype
            tracer._amp_level = getattr(paddle.base.core.AmpLevel, level)
            tracer._amp_dtype = dtype
            try:
                yield
            finally:
                tracer._amp_level, tracer._amp_dtype = saved


def devices() -> list[Any]:
    """pytest params of the devices to test: OPGEN_TEST_DEVICES=cpu|gpu|all (default all).

    GPU cases without a GPU are reported as skipped, never silently dropped.
    """
    wanted = os.environ.get("OPGEN_TEST_DEVICES", "all")
    params: list[Any] = []
    if wanted in ("cpu", "all"):
        params.append("cpu")
    if wanted in ("gpu", "all"):
        params.append(pytest.param("gpu", marks=pytest.mark.skipif(
            not gpu_available(), reason="no GPU visible to Paddle")))
    return params


#: Shape pairs of two broadcasting inputs the generated tests run (numpy's rules): a trailing
#: vector (aligned and not), a leading vector, a scalar tensor, 0-D, size-1 and empty dims, and
#: the general N-d case; each pair also runs reversed.
BROADCAST_PAIRS: list[tuple[tuple[int, ...], tuple[int, ...]]] = [
    ((33, 1024), (1024,)), ((257, 129), (129,)), ((65, 7), (65, 1)), ((4, 9), ()),
    ((1000003,), (1,)), ((3, 1, 7), (1, 5, 1)), ((8, 1, 64), (1, 16, 64)), ((2, 0, 3), (3,)),
    ((4, 1), (0,)), ((1, 1), (1,)),
]


def broadcast_cases(inputs: int) -> list[tuple[tuple[int, ...], ...]]:
    """The shapes of ``inputs`` broadcasting inputs per case: each pair of BROADCAST_PAIRS and its
    reverse, the inputs after the first two alternating between the pair's shapes."""
    cases = []
    for a, b in BROADCAST_PAIRS:
        for first, second in ((a, b), (b, a)):
            cases.append(tuple(first if k % 2 == 0 else second for k in range(inputs)))
    return cases


def sum_to(grad: np.ndarray, shape: Sequence[int], out_shape: Sequence[int]) -> np.ndarray:
    """The gradient of an input of ``shape`` broadcast to ``out_shape``: ``grad`` (elementwise,
    broadcast to ``out_shape``) summed over the dims the input was stretched along."""
    full = np.broadcast_to(np.asarray(grad, np.float64), tuple(out_shape))
    extra = full.ndim - len(shape)
    summed = full.sum(axis=tuple(range(extra))) if extra else full
    stretched = tuple(d for d, n in enumerate(shape) if n == 1 and summed.shape[d] != 1)
    return summed.sum(axis=stretched, keepdims=True) if stretched else np.array(summed)


def no_gradient_allowed(want: np.ndarray, out_shape: Sequence[int]) -> bool:
    """Whether a missing gradient (``None`` from ``paddle.grad``) is right: for an empty input,
    and, on Paddle 2.6, for any input of an op whose output is empty (the generated wrapper's
    empty result hangs on the first input alone there; the gradient it lacks is all zeros)."""
    import paddle

    if want.size == 0:
        return True
    return (paddle.__version__.startswith("2.") and 0 in tuple(out_shape)
            and not np.any(want))


#: Values :func:`sample` puts into a few elements of every tensor of more than this many elements.
SPECIAL_VALUES = (np.nan, np.inf, -np.inf)
SPECIAL_MIN_SIZE = 8


def sample(rng: np.random.Generator, shape: Sequence[int], dtype: str, device: str,
           low: float, high: float, *, stop_gradient: bool = True,
           special: bool = True) -> tuple[Any, np.ndarray]:
    """Uniform data in [low, high): the tensor, and its exact values (after rounding) in float64.

    With ``special`` (the default), tensors of more than ``SPECIAL_MIN_SIZE`` elements also hold
    NaN, +inf and -inf, once each at random places, so every function's NaN and infinity rules
    are compared with numpy's. Output gradients are drawn without them: inf times a derivative
    that is 0 in float32 but tiny in float64 is NaN in one and inf in the other. The reference
    runs on the rounded values, so a float16 input that rounds onto a kink of the op is compared
    against the reference at that same point.
    """
    data = rng.uniform(low, high, size=tuple(shape))
    if special and data.size > SPECIAL_MIN_SIZE:
        flat = data.reshape(-1)
        places = rng.choice(flat.size, size=len(SPECIAL_VALUES), replace=False)
        flat[places] = SPECIAL_VALUES
    tensor = to_paddle(data, dtype, device, stop_gradient=stop_gradient)
    return tensor, to_numpy(tensor)


#: Read once by the op's runtime (csrc/opgen/elementwise.h): "1" fills every output with 0xFF
#: bytes, NaN in every float dtype, before the kernel runs.
POISON_ENV = "OPGEN_POISON_OUTPUTS"


def poison_outputs() -> None:
    """Makes ops loaded in this process fill their outputs with NaN before computing them, so an
    element a kernel forgets to write shows up as NaN instead of as whatever memory held. Call it
    before the op's first call: the runtime reads the setting once."""
    os.environ[POISON_ENV] = "1"


#: How many times the float32-vs-float64 spread of the reference (see :func:`reference`) a
#: kernel that computes in float32 may be off, on top of the dtype's tolerance.
SPREAD_FACTOR = 8.0
#: The largest finite value of each dtype: a result beyond it is +-inf in that dtype.
LARGEST = {"float64": float(np.finfo(np.float64).max), "float32": float(np.finfo(np.float32).max),
           "float16": 65504.0, "bfloat16": 3.3895313892515355e38}


def reference(fn: Callable[..., Any], arrays: Sequence[np.ndarray], attrs: dict[str, Any],
              dtype: str) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:
    """``fn(*arrays, **attrs)`` in float64, per output, and an estimate of the rounding error of
    a kernel computing it: how far ``fn`` moves when it runs on the inputs cast to float32. That
    is the error of a kernel computing in float32 (float32, float16 and bfloat16 ops), small where
    the op is well conditioned and large where it cancels; for float64 ops it is scaled down by
    the ratio of the unit roundoffs, 2^-29. Where float32 overflows, the estimate is infinite for
    float32 kernels (they overflow too) and zero for float64 ones (no estimate: the dtype's
    tolerance alone).

    For kernels computing in float32, int and float attrs (``fn``'s defaults included) reach ``fn``
    as those kernels see them, rounded to float32: such a kernel takes ``cos(k)`` of ``float(k)``
    and ``alpha * x`` of ``float(alpha)``. Float64 kernels see them exact, and so does ``fn``."""
    if dtype != "float64":
        attrs = _as_float32_kernel_sees(fn, attrs)
    scale = 2.0**-29 if dtype == "float64" else 1.0
    with np.errstate(all="ignore"):
        exact = as_tuple(fn(*arrays, **attrs))
        # Three float32 runs, at the inputs and one float32 step either side: each rounds its
        # intermediates differently, so the largest of them is rarely small by luck.
        spread = [np.zeros(np.shape(e)) for e in exact]
        for step in (0.0, np.inf, -np.inf):
            low = as_tuple(_nudging_sums(step, fn, *(_float32(a, step) for a in arrays),
                                         **{name: _float32(v, step) for name, v in attrs.items()}))
            for k, (e, lo) in enumerate(zip(exact, low, strict=True)):
                spread[k] = np.fmax(spread[k], np.abs(np.asarray(lo, np.float64) - e))
        unknown = 0.0 if dtype == "float64" else np.inf
        spread = [np.where(np.isnan(e), 0.0, np.where(np.isfinite(d), scale * d, unknown))
                  for e, d in zip(exact, spread, strict=True)]
    return exact, tuple(spread)


def assert_close(actual: np.ndarray, expected: np.ndarray, dtype: str, what: str,
                 spread: np.ndarray | None = None) -> None:
    """``actual`` within the dtype's tolerance of ``expected``, widened by ``SPREAD_FACTOR``
    times the reference's ``spread``; NaN and infinities must match exactly. Where ``expected``
    may lie beyond the dtype's largest value (within the tolerance), the dtype holds an infinity
    of its sign, which passes (a float16 row sum of 32768 values of 4 is +inf)."""
    rtol, atol = TOLERANCES[dtype]
    actual, expected = np.broadcast_arrays(np.asarray(actual, np.float64),
                                           np.asarray(expected, np.float64))
    tol = atol + rtol * np.abs(expected)
    if spread is not None:
        tol = tol + SPREAD_FACTOR * np.broadcast_to(spread, expected.shape)
    with np.errstate(invalid="ignore"):
        ok = np.where(np.isfinite(expected), np.abs(actual - expected) <= tol,
                      (actual == expected) | (np.isnan(actual) & np.isnan(expected)))
        ok |= np.isfinite(expected) & (np.abs(expected) + tol >= LARGEST[dtype]) & \
            (actual == np.copysign(np.inf, expected))
    if not ok.all():
        bad = np.argwhere(~ok) if ok.ndim else [()]
        lines = [f"{what} ({dtype}): {int((~ok).sum())} of {ok.size} elements differ"]
        for index in bad[:3]:
            at = tuple(int(i) for i in index)
            lines.append(f"  at {at}: got {float(actual[at])!r}, want {float(expected[at])!r} "
                         f"+- {float(tol[at]):.3g}")
        raise AssertionError("\n".join(lines))


#: Where :func:`reference`'s float32 runs move each row sum (:func:`row_sum`, :func:`row_mean`)
#: one float32 step: a kernel rounds its sums in another order (and the GPU fuses a product into
#: the subtraction of a sum of such products), and a value that cancels against a sum, such as
#: x - mean(x) over a one-column row, moves by that much there; 0: sums as numpy rounds them.
_SUM_STEP = 0.0


def _nudging_sums(step: float, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` with row sums moved one float32 step towards ``step``."""
    global _SUM_STEP
    _SUM_STEP = step
    try:
        return fn(*args, **kwargs)
    finally:
        _SUM_STEP = 0.0


def _float32(value: Any, step: float) -> Any:
    """``value``'s arrays (or a list's) in float32, moved one float32 step towards ``step``
    unless it is 0; anything else as it is."""
    if isinstance(value, (list, tuple)) and value and isinstance(value[0], np.ndarray):
        return [_float32(v, step) for v in value]
    if not isinstance(value, np.ndarray):
        return value
    low = value.astype(np.float32)
    return np.nextafter(low, np.float32(step)) if step else low


def _as_float32_kernel_sees(fn: Callable[..., Any], attrs: dict[str, Any]) -> dict[str, Any]:
    values = {name: p.default for name, p in inspect.signature(fn).parameters.items()
              if p.default is not inspect.Parameter.empty}
    values.update(attrs)
    return {name: float(np.float32(v)) if isinstance(v, (int, float)) and not isinstance(v, bool)
            else v for name, v in values.items()}


def as_tuple(result: Any) -> tuple[Any, ...]:
    """An op's (or a reference's) result as a tuple, one item per output."""
    return tuple(result) if isinstance(result, (tuple, list)) else (result,)


def central_difference(fn: Callable[..., np.ndarray], args: list[np.ndarray], index: int,
                       h: float) -> np.ndarray:
    """d fn / d args[index], elementwise, by central differences.

    For an elementwise op each output element depends on the same element of each input only, so
    perturbing every element of one input at once gives the whole gradient in two calls.
    """
    plus = [a.copy() for a in args]
    minus = [a.copy() for a in args]
    plus[index] += h
    minus[index] -= h
    return (fn(*plus) - fn(*minus)) / (2 * h)


def richardson_difference(fn: Callable[..., np.ndarray], args: list[np.ndarray], index: int,
                          h: float) -> np.ndarray:
    """Central differences at h and h/2 combined to cancel the h**2 error term: O(h**4)."""
    coarse = central_difference(fn, args, index, h)
    fine = central_difference(fn, args, index, h / 2)
    return (4 * fine - coarse) / 3


def smooth_points(fn: Callable[..., np.ndarray], args: list[np.ndarray], index: int,
                  h: float) -> np.ndarray:
    """Mask of the points where ``fn`` is smooth in args[index] at scale h: there, central
    differences at h and h/2 agree. Kinks (relu at 0, clip at its bounds) are left out of finite
    difference checks; the check against the backward expression still covers them."""
    coarse = central_difference(fn, args, index, h)
    fine = central_difference(fn, args, index, h / 2)
    return np.isfinite(coarse) & np.isclose(coarse, fine, rtol=1e-4, atol=1e-6)


def large_tests_enabled() -> bool:
    return os.environ.get("OPGEN_TEST_LARGE") == "1"


def assert_periodic(out: Any, block: np.ndarray, dtype: str, what: str,
                    chunk: int = 2**26) -> None:
    """``out`` (flat, huge) equals ``block`` repeated, checked chunk by chunk on the host."""
    host = out.numpy() if not str(out.dtype).endswith("bfloat16") else None
    if host is None:
        raise NotImplementedError("periodic checks read float16/float32/float64 outputs")
    period = block.size
    n = host.size
    for start in range(0, n, chunk):
        stop = min(start + chunk, n)
        index = np.arange(start, stop) % period
        assert_close(host[start:stop].astype(np.float64), block[index], dtype,
                     f"{what}[{start}:{stop}]")


# Deploy tests (marked ``deploy``): the op in a model, through ``paddle.jit.to_static``, saved
# with ``paddle.jit.save`` and run by a fresh process as a server would (docs/deploy.md). Every
# kind's generated tests call these, on the CPU, in float32.

@contextlib.contextmanager
def on_cpu() -> Iterator[None]:
    """Paddle's current device is the CPU inside: a deploy test's model parameter, its static
    program and its eager reference all run there, whatever device the other tests use (on a GPU
    whose arch Paddle has no kernels for, the model's own multiply would not run)."""
    import paddle

    previous = paddle.device.get_device()
    paddle.device.set_device("cpu")
    try:
        yield
    finally:
        paddle.device.set_device(previous)


def deploy_inputs(shapes: dict[str, tuple[int, ...]], domain: dict[str, Sequence[float]],
                  batched: Sequence[str], *, stop_gradient: bool = True
                  ) -> tuple[dict[str, Any], list[Any]]:
    """float32 CPU inputs of the deploy tests, by name, drawn from ``domain`` without NaN or
    infinities, and their InputSpecs: the leading (batch) dim of each input in ``batched`` is
    None, known only when the program runs."""
    import paddle

    rng = np.random.default_rng(9)
    inputs = {name: sample(rng, shape, "float32", "cpu", *domain[name], special=False,
                           stop_gradient=stop_gradient)[0]
              for name, shape in shapes.items()}
    specs = [paddle.static.InputSpec([None, *shape[1:]] if name in batched else list(shape),
                                     "float32", name) for name, shape in shapes.items()]
    return inputs, specs


def static_model(model: Any, specs: list[Any]) -> Any:
    """``model`` (a ``paddle.nn.Layer``) in a full static graph: ``paddle.jit.to_static`` with
    ``full_graph=True`` and ``specs`` as its InputSpecs."""
    import paddle

    return paddle.jit.to_static(model, input_spec=specs, full_graph=True)


# A deploy test's model is the generated tests' ``Model(op, attrs)``: the op called with fixed attrs
# on its first input times a parameter, ``scale`` (1.0: a model without parameters cannot be served
# by Paddle 2.6's predictor). Its forward names the op's inputs, as to_static requires, so each op
# has its own (templates/partials/deploy_model.py.jinja); the helpers below take a function that
# makes a fresh one.

def assert_static_matches_eager(make_model: Callable[[], Any], inputs: dict[str, Any],
                                specs: list[Any], grad_outputs: Sequence[int] | None,
                                grad_inputs: Sequence[str] | None = None) -> None:
    """The outputs of a model through to_static equal eager's, bit for bit; and, unless
    ``grad_outputs`` is None (an op without a backward), the gradients of the inputs (those named
    in ``grad_inputs``; default all) and of the model's parameter from the outputs at those
    indices (given gradients that vary with them)."""
    import paddle

    wrt = list(inputs) if grad_inputs is None else list(grad_inputs)
    results: list[dict[str, np.ndarray]] = []
    with on_cpu():
        for model in (make_model(), static_model(make_model(), specs)):
            outputs = as_tuple(model(*inputs.values()))
            values = {f"output #{k}": to_numpy(o) for k, o in enumerate(outputs)}
            if grad_outputs is not None:
                chosen = [outputs[k] for k in grad_outputs]
                grads_out = [paddle.full_like(o, 0.5) + o.detach() * 0.25 for o in chosen]
                grads = paddle.grad(chosen, [*(inputs[n] for n in wrt), model.scale],
                                    grad_outputs=grads_out)
                names = [*(f"grad_{n}" for n in wrt), "the parameter's gradient"]
                values.update((n, to_numpy(g)) for n, g in zip(names, grads, strict=True))
            results.append(values)
    eager, static = results
    for name, value in eager.items():
        np.testing.assert_array_equal(static[name], value,
                                      err_msg=f"to_static against eager: {name}")


def assert_saved_model_serves(make_model: Callable[[], Any], inputs: dict[str, Any],
                              specs: list[Any], way: str, op_dir: str, tmp_path: Any,
                              outputs: Sequence[str], other: dict[str, Any] | None = None
                              ) -> None:
    """``paddle.jit.save`` of a model through to_static, then ``way`` ("jit.load" or
    "predictor") in a fresh process that registers the op from ``op_dir`` first
    (:func:`serve_saved_model`): eager's ``outputs``, exactly through jit.load; within float32
    rounding through the predictor, whose passes may fuse and reorder the ops around the op.
    ``other``: inputs with other sizes of the InputSpecs' None dims, which the same loaded model
    (the same predictor) then serves too, giving eager's outputs for them."""
    import paddle

    prefix = str(tmp_path / "model")
    input_sets = [inputs] if other is None else [inputs, other]
    with on_cpu():
        paddle.jit.save(static_model(make_model(), specs), prefix)
        eager = make_model()  # to_static converts the layer it is given: a fresh one
        expected = [[o.numpy() for o in as_tuple(eager(*i.values()))] for i in input_sets]
    served = serve_saved_model(prefix, [{n: t.numpy() for n, t in i.items()} for i in input_sets],
                               way, [op_dir])
    for k, (got, want_all) in enumerate(zip(served, expected, strict=True)):
        for name, out, want in zip(outputs, got, want_all, strict=True):
            what = name if k == 0 else f"{name}, inputs of other sizes " + \
                ", ".join(f"{n} {list(t.shape)}" for n, t in input_sets[k].items())
            if way == "jit.load":
                np.testing.assert_array_equal(out, want, err_msg=what)
            else:
                np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6, err_msg=what)


def assert_saved_model_needs_the_op(make_model: Callable[[], Any], specs: list[Any],
                                    op_name: str, tmp_path: Any) -> None:
    """A fresh process that has not registered the op is told which op and how (opgen's
    DeployError), not crashed by Paddle's loader."""
    import paddle

    prefix = str(tmp_path / "model")
    with on_cpu():
        paddle.jit.save(static_model(make_model(), specs), prefix)
    with pytest.raises(AssertionError, match=rf"DeployError: .*{op_name}.*opgen\.register"):
        run_saved_model(prefix, {}, "jit.load", [])


_SAVED_MODEL_CHILD = r"""
import sys
import numpy as np
import opgen
import paddle
from opgen.errors import DeployError

prefix, way, folder, count, *libraries = sys.argv[1:]
for library in libraries:
    opgen.register(library)
try:
    opgen.check_model(prefix)
except DeployError as err:
    sys.exit(f"DeployError: {err}")
if way == "jit.load":
    layer = paddle.jit.load(prefix)
else:
    from pathlib import Path
    from paddle import inference
    model = f"{prefix}.json" if Path(f"{prefix}.json").is_file() else f"{prefix}.pdmodel"
    config = inference.Config(model, f"{prefix}.pdiparams")
    config.disable_gpu()
    predictor = inference.create_predictor(config)
for k in range(int(count)):  # one model serves each set of inputs in turn
    inputs = dict(np.load(f"{folder}/in{k}.npz"))
    if way == "jit.load":
        outputs = layer(*(paddle.to_tensor(a) for a in inputs.values()))
        outputs = [o.numpy() for o in (outputs if isinstance(outputs, (list, tuple))
                                       else [outputs])]
    else:
        for name in predictor.get_input_names():
            predictor.get_input_handle(name).copy_from_cpu(inputs[name])
        predictor.run()
        outputs = [predictor.get_output_handle(n).copy_to_cpu()
                   for n in predictor.get_output_names()]
    np.savez(f"{folder}/out{k}.npz", *outputs)
"""


def pytest_configure(config: Any) -> None:
    """Registers the generated tests' marker (``opgen test`` loads this module as a pytest
    plugin): ``opgen test OP -- -m "not deploy"`` skips those tests, ``-m deploy`` runs only
    them. Leaves out of the summary the warning of Paddle's ``import paddle`` (3.x imports its
    cpp_extension there) that no ccache is installed: the op is compiled before the tests run."""
    config.addinivalue_line("markers", "deploy: to_static, jit.save / jit.load and the Paddle "
                                       "Inference predictor, in fresh processes (CPU)")
    config.addinivalue_line("filterwarnings", "ignore:No ccache found:UserWarning")


def run_saved_model(prefix: str, inputs: dict[str, np.ndarray], way: str,
                    libraries: Sequence[str]) -> list[np.ndarray]:
    """The outputs of the model saved at ``prefix`` (``paddle.jit.save``) for ``inputs`` (by the
    names of its InputSpecs, in order), computed in a fresh Python process on the CPU that first
    registers ``libraries`` (as ``opgen.register`` takes them), then checks the model
    (``opgen.check_model``), then runs it through ``way``: "jit.load" or "predictor" (Paddle
    Inference). Fails the test with the child's last lines of output when it fails."""
    return serve_saved_model(prefix, [inputs], way, libraries)[0]


def serve_saved_model(prefix: str, input_sets: Sequence[dict[str, np.ndarray]], way: str,
                      libraries: Sequence[str]) -> list[list[np.ndarray]]:
    """:func:`run_saved_model` for each of ``input_sets`` in turn, in one fresh process, through
    one loaded model or one predictor, as a server takes requests of several sizes: the outputs
    for each set."""
    import subprocess
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        for k, inputs in enumerate(input_sets):
            np.savez(os.path.join(tmp, f"in{k}.npz"), **inputs)
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "GLOG_minloglevel": "2"}
        proc = subprocess.run([sys.executable, "-c", _SAVED_MODEL_CHILD, prefix, way, tmp,
                               str(len(input_sets)), *libraries], capture_output=True, text=True,
                              env=env)
        if proc.returncode != 0:
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
            raise AssertionError(f"{way} of {prefix} in a fresh process failed "
                                 f"(exit {proc.returncode}):\n{tail}")
        served = []
        for k in range(len(input_sets)):
            with np.load(os.path.join(tmp, f"out{k}.npz")) as outputs:
                served.append([outputs[f"arr_{j}"] for j in range(len(outputs.files))])
        return served


def named_reference(fn: Callable[..., Any], arrays: dict[str, np.ndarray], attrs: dict[str, Any],
                    dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """``fn(**arrays, **attrs)`` (a custom op's reference.py function) in float64, and an
    estimate of a kernel's rounding error as :func:`reference` makes it: how far ``fn`` moves when
    its float arrays are float32 (integer arrays, such as indices, are passed as they are). A
    reference that keeps the dtype it is given (``np.zeros_like``, not ``np.zeros``) thus widens
    the tolerance of sums by their float32 error; one that computes in float64 gets the dtype's
    tolerance alone."""
    def floats(step: float) -> dict[str, Any]:
        return {n: _float32(a, step) if isinstance(a, np.ndarray) and a.dtype == np.float64
                else a for n, a in arrays.items()}

    with np.errstate(all="ignore"):
        exact = np.asarray(fn(**arrays, **attrs), np.float64)
        spread = np.zeros(exact.shape)
        for step in (0.0, np.inf, -np.inf):
            low = np.asarray(fn(**floats(step), **attrs), np.float64)
            if low.shape != exact.shape:  # a size the data gives moved with the rounding:
                continue                  # nothing to learn from this run
            spread = np.fmax(spread, np.abs(low - exact))
    scale = 2.0**-29 if dtype == "float64" else 1.0
    unknown = 0.0 if dtype == "float64" else np.inf
    spread = np.where(np.isnan(exact), 0.0, np.where(np.isfinite(spread), scale * spread, unknown))
    return exact, spread


# Row-wise ops (kind: rowwise): a per-element input [*, C] is seen as [rows, C]; per-column
# inputs are [C], per-row ones [*] (or [*, 1]), as [rows, 1] in the references.

#: The row lengths every generated rowwise test runs: one element, an odd tail, one warp's worth
#: of vectors, and rows that take a block, several blocks and a loop over global memory.
ROW_LENGTHS: tuple[int, ...] = (1, 7, 128, 1000, 4096, 32768)
#: Shapes of the per-element inputs: each row length, no rows at all, and several leading dims.
ROW_SHAPES: list[tuple[int, ...]] = [(5, 1), (3, 7), (4, 128), (3, 1000), (2, 4096), (1, 32768),
                                     (0, 16), (2, 3, 33)]


def rows_of(shape: Sequence[int]) -> tuple[int, int]:
    """(rows, cols) of a per-element input of ``shape``: cols is its last dim."""
    return int(np.prod(shape[:-1], dtype=np.int64)), int(shape[-1])


def role_shape(shape: Sequence[int], role: str) -> tuple[int, ...]:
    """The shape of an input of ``role`` (element, column, row) for per-element inputs of
    ``shape``."""
    return {"element": tuple(shape), "column": tuple(shape[-1:]),
            "row": tuple(shape[:-1])}[role]


def to_rows(array: np.ndarray, role: str, shape: tuple[int, int]) -> np.ndarray:
    """An input of ``role`` as the references compute with it: per-element [rows, cols],
    per-column [cols], per-row [rows, 1]."""
    array = np.asarray(array)  # float32 where ot.reference estimates a float32 kernel's error
    if role == "element":
        return array.reshape(shape)
    if role == "row":
        return array.reshape(shape[0], 1)
    return array


def from_rows(value: Any, role: str, shape: Sequence[int], *, summed: bool = False) -> np.ndarray:
    """A reference's result in the op's shapes, for per-element inputs of ``shape``: per-element
    (``shape``), per-row (``shape`` without its last dim; ``summed``: a per-element value summed
    over the row, the gradient of a per-row input) or per-column (summed over the rows: the
    gradient of a per-column input)."""
    rows, cols = rows_of(shape)
    value = np.asarray(value, np.float64)
    if role == "element":
        return np.broadcast_to(value, (rows, cols)).reshape(tuple(shape))
    if role == "column":
        return np.broadcast_to(value, (rows, cols)).sum(axis=0)
    if summed:
        return np.broadcast_to(value, (rows, cols)).sum(axis=-1).reshape(tuple(shape[:-1]))
    return np.array(np.broadcast_to(value, (rows, 1))[:, 0].reshape(tuple(shape[:-1])))


def _float(value: Any) -> np.ndarray:
    """``value`` as a float array: float32 where it is float32 (the references' float32 runs),
    float64 otherwise. (``np.result_type(value, np.float32)`` made a Python float, such as an
    attr-only expression's value, float32 in the float64 reference.)"""
    value = np.asarray(value)
    return value if value.dtype == np.float32 else value.astype(np.float64)


def row_sum(value: Any, shape: tuple[int, int]) -> np.ndarray:
    """The sum over each row of ``value`` (broadcast to ``shape``), as [rows, 1]; 0 for an empty
    row."""
    total = np.broadcast_to(_float(value), shape).sum(axis=-1, keepdims=True)
    if _SUM_STEP and total.dtype == np.float32:
        total = np.nextafter(total, np.float32(_SUM_STEP))
    return total


def row_mean(value: Any, shape: tuple[int, int]) -> np.ndarray:
    """The mean over each row, as [rows, 1]; NaN for an empty row."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return row_sum(value, shape) / shape[1]


def row_max(value: Any, shape: tuple[int, int]) -> np.ndarray:
    """The largest value of each row, as [rows, 1]: NaN if the row holds one, -inf if empty."""
    full = np.broadcast_to(_float(value), shape)
    return np.max(full, axis=-1, keepdims=True, initial=-np.inf)


def row_min(value: Any, shape: tuple[int, int]) -> np.ndarray:
    """The smallest value of each row, as [rows, 1]: NaN if the row holds one, +inf if empty."""
    full = np.broadcast_to(_float(value), shape)
    return np.min(full, axis=-1, keepdims=True, initial=np.inf)


def directional_difference(fn: Callable[..., float], args: list[np.ndarray], index: int,
                           direction: np.ndarray, h: float, *, atol: float | None = None
                           ) -> float | None:
    """The derivative of the scalar ``fn`` along ``direction`` in args[index], by central
    differences at h and h/2 combined to cancel the h**2 term (Richardson): O(h**4).

    With ``atol``: None where the two differences disagree by more than 1e-6 of the result plus
    ``atol`` (the Richardson value is then no better than that), which is what crossing a kink
    within h does (a row's max changing hands, a ``where`` flipping): no derivative to check
    there."""
    def central(step: float) -> float:
        plus = [a.copy() for a in args]
        minus = [a.copy() for a in args]
        plus[index] = plus[index] + step * direction
        minus[index] = minus[index] - step * direction
        return (fn(*plus) - fn(*minus)) / (2 * step)

    coarse, fine = central(h), central(h / 2)
    value = (4 * fine - coarse) / 3
    if atol is not None and not abs(coarse - fine) <= 1e-6 * abs(value) + atol:
        return None
    return value


def dtype_name(tensor: Any) -> str:
    """A Paddle tensor's dtype as a string: float32, bfloat16, ..."""
    return str(tensor.dtype).removeprefix("paddle.")
