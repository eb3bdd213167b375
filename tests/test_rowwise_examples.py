"""The rowwise kind built and run for real: the four reference ops (examples/softmax,
layer_norm, rms_norm, add_rms_norm) pass their generated tests and agree with Paddle's own ops
(F.softmax, F.layer_norm) or their composition, forward and gradients, on the CPU; their CUDA
half compiles against paddlepaddle-gpu 2.6.2; `opgen new --rowwise` gives an op that passes its
own tests. Their generated deploy tests (to_static, jit.save, a fresh process's jit.load and
predictor) pass on Paddle 3.3.1 and, on the CPU, on paddlepaddle-gpu 2.6.2."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import GPU_PYTHON, ROWWISE_EXAMPLES, run_opgen

pytestmark = pytest.mark.build

SHAPES = [(64, 1024), (2, 8, 129), (3, 1), (5, 4096)]


@pytest.fixture(scope="module")
def ops():
    import opgen

    return {name: getattr(opgen.load(folder, cpu_only=True), name)
            for name, folder in ROWWISE_EXAMPLES.items()}


def tensors(rng, dtype, *shapes, low=-3.0, high=3.0):
    """Two copies of each of the inputs (ours, Paddle's), tracked by autograd."""
    import paddle

    arrays = [rng.uniform(low, high, size=s).astype(dtype) for s in shapes]
    return ([paddle.to_tensor(a, stop_gradient=False) for a in arrays],
            [paddle.to_tensor(a, stop_gradient=False) for a in arrays])


def assert_same(ours, theirs, ours_in, theirs_in, dtype, rng, *, sums=()):
    """Equal outputs, and equal gradients of every input for one random output gradient;
    ``sums`` names the inputs whose gradients sum over the rows (looser in float32)."""
    import paddle

    rtol = 1e-12 if dtype == "float64" else 2e-5
    ours, theirs = list(ours), list(theirs)
    for got, want in zip(ours, theirs, strict=True):
        assert got.shape == want.shape
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=rtol, atol=rtol)
    grads_out = [paddle.to_tensor(rng.uniform(-1, 1, size=t.shape).astype(dtype)) for t in theirs]
    got = paddle.grad(ours, ours_in, grad_outputs=grads_out)
    want = paddle.grad(theirs, theirs_in, grad_outputs=grads_out)
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g.shape == w.shape, k
        scale = np.abs(w.numpy()).max() + 1 if k in sums else 1
        atol = rtol * scale * (64 if k in sums and dtype == "float32" else 1)
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=rtol, atol=atol,
                                   err_msg=f"gradient of input {k}")


@pytest.mark.parametrize("name", sorted(ROWWISE_EXAMPLES))
def test_generated_tests_pass_on_cpu(name):
    result = run_opgen("test", str(ROWWISE_EXAMPLES[name]), "--device", "cpu", "--", "-q",
                       "-p", "no:warnings", "-m", "not deploy")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and " failed" not in result.stdout


@pytest.mark.parametrize("name", sorted(ROWWISE_EXAMPLES))
def test_generated_deploy_tests_pass_on_cpu(name):
    result = run_opgen("test", str(ROWWISE_EXAMPLES[name]), "--device", "cpu", "--", "-q",
                       "-p", "no:warnings", "-m", "deploy")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    # to_static with two attr sets, the static checks, jit.load, predictor, without the op
    assert "6 passed" in result.stdout, result.stdout[-1000:]


@pytest.mark.gpu_env
@pytest.mark.skipif(not GPU_PYTHON.exists(), reason="no .venv-gpu (paddlepaddle-gpu 2.6.2)")
def test_generated_deploy_tests_pass_on_paddle_2_6():
    """layer_norm (three inputs, per-row statistics among its outputs) through Paddle 2.6.2's
    static graph, jit.load and predictor, on the CPU."""
    result = run_opgen("test", str(ROWWISE_EXAMPLES["layer_norm"]), "--device", "cpu", "--",
                       "-q", "-p", "no:warnings", "-m", "deploy", python=GPU_PYTHON)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and "skipped" not in result.stdout, result.stdout[-1000:]


def test_a_per_row_input_passes_the_deploy_tests(tmp_path):
    """A per-row input [*] has a None batch dim in the deploy tests' InputSpecs too, and a known
    dim that disagrees is refused in a static program."""
    op = tmp_path / "row_shift"
    op.mkdir()
    spec = op / "row_shift.yaml"
    spec.write_text("name: row_shift\nkind: rowwise\ninputs: {x: element, shift: row}\n"
                    "outputs: [out]\nforward:\n  out: x - max(x) + shift\nbackward: auto\n")
    assert run_opgen("generate", str(spec)).returncode == 0
    result = run_opgen("test", str(op), "--device", "cpu", "--", "-q", "-p", "no:warnings",
                       "-m", "deploy")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "5 passed" in result.stdout, result.stdout[-1000:]  # no attrs: one to_static case
    # shift's gradient, a row sum made in float32, stored in float16 by opgen's own narrowing
    # (Paddle's cast kernel, which it used before, left garbage on the H200: docs/fuzzing.md,
    # bug 23)
    result = run_opgen("test", str(op), "--device", "cpu", "--", "-q", "-p", "no:warnings",
                       "-k", "test_backward and float16")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and " failed" not in result.stdout, result.stdout[-1000:]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("scale", [1.0, 0.125])
def test_softmax_matches_paddle(ops, dtype, shape, scale):
    import paddle.nn.functional as F

    rng = np.random.default_rng(0)
    ours_in, theirs_in = tensors(rng, dtype, shape, low=-20, high=20)
    assert_same([ops["softmax"](ours_in[0], scale=scale)], [F.softmax(theirs_in[0] * scale)],
                ours_in, theirs_in, dtype, rng)


def test_softmax_of_a_row_of_minus_inf_is_nan(ops):
    """Documented in docs/spec.md: exp(-inf - (-inf)) is NaN, as in numpy and PyTorch."""
    import paddle

    x = paddle.to_tensor(np.array([[-np.inf] * 4, [0.0, 1.0, -np.inf, 2.0]], np.float32))
    out = ops["softmax"](x).numpy()
    assert np.isnan(out[0]).all()
    assert out[1, 2] == 0.0 and abs(out[1].sum() - 1.0) < 1e-6


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_layer_norm_matches_paddle(ops, dtype, shape):
    import paddle.nn.functional as F

    rng = np.random.default_rng(1)
    c = shape[-1]
    ours_in, theirs_in = tensors(rng, dtype, shape, (c,), (c,))
    out, mean, rstd = ops["layer_norm"](*ours_in, eps=1e-5)
    theirs = F.layer_norm(theirs_in[0], [c], weight=theirs_in[1], bias=theirs_in[2], epsilon=1e-5)
    x = ours_in[0].numpy().astype(np.float64).reshape(-1, c)
    np.testing.assert_allclose(mean.numpy().reshape(-1), x.mean(-1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rstd.numpy().reshape(-1), 1 / np.sqrt(x.var(-1) + 1e-5),
                               rtol=1e-5, atol=1e-6)
    assert mean.shape == list(shape[:-1]) and rstd.dtype == ours_in[0].dtype
    assert_same([out], [theirs], ours_in, theirs_in, dtype, rng, sums=(1, 2))


def rms_norm_composed(x, weight, eps):
    import paddle

    return x * paddle.rsqrt((x * x).mean(-1, keepdim=True) + eps) * weight


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_rms_norm_matches_its_composition(ops, dtype, shape):
    rng = np.random.default_rng(2)
    ours_in, theirs_in = tensors(rng, dtype, shape, (shape[-1],))
    assert_same([ops["rms_norm"](*ours_in, eps=1e-6)], [rms_norm_composed(*theirs_in, 1e-6)],
                ours_in, theirs_in, dtype, rng, sums=(1,))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_add_rms_norm_matches_its_composition(ops, dtype, shape):
    rng = np.random.default_rng(3)
    ours_in, theirs_in = tensors(rng, dtype, shape, shape, (shape[-1],))
    out, h = ops["add_rms_norm"](*ours_in)
    theirs_h = theirs_in[0] + theirs_in[1]
    theirs = [rms_norm_composed(theirs_h, theirs_in[2], 1e-6), theirs_h]
    assert_same([out, h], theirs, ours_in, theirs_in, dtype, rng, sums=(2,))


def test_shapes_are_refused_naming_the_op_the_input_and_the_role(ops):
    import paddle

    with pytest.raises(ValueError, match=r"layer_norm: weight has shape \[3\], but as a "
                                         r"per-column input it must be \[8\]"):
        ops["layer_norm"](paddle.ones([4, 8]), paddle.ones([3]), paddle.ones([8]))
    with pytest.raises(ValueError, match=r"add_rms_norm: residual has shape \[4, 7\], but as a "
                                         r"per-element input it must be x's shape \[4, 8\]"):
        ops["add_rms_norm"](paddle.ones([4, 8]), paddle.ones([4, 7]), paddle.ones([8]))
    with pytest.raises(TypeError, match="rms_norm: weight is float64 but x is float32"):
        ops["rms_norm"](paddle.ones([4, 8]), paddle.ones([8], dtype="float64"))


def test_views_parameters_and_static_mode_take_their_own_paths(ops):
    """The eager call reads neither the mode nor (on Paddle 3) contiguity: a strided view is made
    dense by the kernels' checks, a parameter takes the slow path and works, and in static mode
    an eager tensor is refused in Python, where Paddle's static API would abort the process."""
    import paddle

    rng = np.random.default_rng(3)
    x = paddle.to_tensor(rng.uniform(-3, 3, (8, 16)).astype("float32"))
    view = x[::2]
    assert not view.is_contiguous()
    weight = paddle.create_parameter([16], "float32")
    weight.set_value(paddle.to_tensor(rng.uniform(0.5, 2, 16).astype("float32")))
    assert type(weight) is not paddle.Tensor
    dense = ops["rms_norm"](view.contiguous(), weight)
    np.testing.assert_array_equal(ops["rms_norm"](view, weight).numpy(), dense.numpy())
    paddle.enable_static()
    try:
        with pytest.raises(TypeError, match="x is an eager paddle.Tensor, but Paddle is in "
                                            "static mode"):
            ops["softmax"](x)
    finally:
        paddle.disable_static()


def test_outputs_the_backward_does_not_read_are_stop_gradient(ops):
    """layer_norm's mean and rstd: its backward reads only out's gradient, so they are
    stop_gradient, eager and static. A loss through them alone is paddle.grad's error (it was a
    silent zero gradient), and adding them to a loss leaves x's gradient out's."""
    import paddle

    rng = np.random.default_rng(4)
    x = paddle.to_tensor(rng.uniform(-3, 3, (4, 8)).astype("float32"), stop_gradient=False)
    w = paddle.to_tensor(rng.uniform(0.5, 2, 8).astype("float32"), stop_gradient=False)
    b = paddle.zeros([8], "float32")
    out, mean, rstd = ops["layer_norm"](x, w, b)
    assert (out.stop_gradient, mean.stop_gradient, rstd.stop_gradient) == (False, True, True)
    with pytest.raises(ValueError, match="does not appear in the backward graph"):
        paddle.grad([mean.sum()], [x])
    alone, = paddle.grad([(out * out).sum()], [x])
    out, mean, rstd = ops["layer_norm"](x, w, b)
    both, = paddle.grad([(out * out).sum() + mean.sum() + rstd.sum()], [x])
    np.testing.assert_array_equal(both.numpy(), alone.numpy())
    paddle.enable_static()
    try:
        program = paddle.static.Program()
        with paddle.static.program_guard(program):
            xs = paddle.static.data("x", [-1, 8], "float32")
            ws = paddle.static.data("w", [8], "float32")
            bs = paddle.static.data("b", [8], "float32")
            xs.stop_gradient = False
            results = ops["layer_norm"](xs, ws, bs)
        assert [r.stop_gradient for r in results] == [False, True, True]
    finally:
        paddle.disable_static()


def test_new_rowwise_op_builds_and_passes_its_own_tests(tmp_path):
    assert run_opgen("new", "my_norm", "--rowwise", "--dir", str(tmp_path)).returncode == 0
    op = tmp_path / "my_norm"
    assert "kind: rowwise" in (op / "my_norm.yaml").read_text()
    result = run_opgen("test", str(op), "--device", "cpu", "--", "-q", "-p", "no:warnings")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]


def test_backward_auto_passes_the_generated_tests(tmp_path):
    """rms_norm with `backward: auto`: the derived backward agrees with the numpy reference of
    itself and, in float64, with finite differences of the forward."""
    text = (ROWWISE_EXAMPLES["rms_norm"] / "rms_norm.yaml").read_text()
    op = tmp_path / "auto_rms_norm"
    op.mkdir()
    spec = op / "auto_rms_norm.yaml"
    spec.write_text(text.split("\nbackward:")[0].replace("name: rms_norm", "name: auto_rms_norm")
                    .replace("custom_rms_norm", "custom_auto_rms_norm") + "\nbackward: auto\n")
    assert run_opgen("generate", str(spec)).returncode == 0
    result = run_opgen("test", str(op), "--device", "cpu", "--", "-q", "-p", "no:warnings")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]


@pytest.mark.gpu_env
@pytest.mark.skipif(not GPU_PYTHON.exists(), reason="no .venv-gpu (paddlepaddle-gpu 2.6.2)")
@pytest.mark.parametrize("name", ["softmax", "layer_norm"])
def test_cuda_sources_compile_and_link_against_paddle_2_6(name):
    result = run_opgen("build", str(ROWWISE_EXAMPLES[name]), "--arch", "90", python=GPU_PYTHON)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "CPU + CUDA sm_90" in result.stdout
