"""The `deploy` stage of scripts/gpu/h200.sh: examples/relu6 and examples/bias_gelu on gpu:0 under
to_static (forward and gradients), saved and loaded in a fresh process (jit.load and the Paddle
Inference predictor with enable_use_gpu), paddle.amp.auto_cast O1/O2, and relu6_ in place.

paddlepaddle-gpu 2.6.2's own kernels do not run on sm_90 (they leave outputs unwritten), so the
GPU path here holds the custom ops alone: inputs are copied from the host, gradients of outputs
are passed in, no Paddle built-in op computes anything, and every result is compared on the
host with the same op's CPU kernels (which tests/ and the generated tests check against numpy).
AMP cases use inputs already in the dtype the op should compute in: Paddle's cast kernel is one
of those that do not run. Prints one line per check; exits 1 if any fails.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import paddle

import opgen

ROOT = Path(__file__).resolve().parents[2]
DEVICE = "gpu:0"  # --device cpu: a dry run of the same checks on this machine
failures: list[str] = []


def check(name: str, ok: bool, detail: str = "") -> None:
    print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)
    if not ok:
        failures.append(name)


def close(a: np.ndarray, b: np.ndarray, tol: float = 1e-6) -> tuple[bool, str]:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    err = float(np.max(np.abs(a - b))) if a.size else 0.0
    return a.shape == b.shape and err <= tol, f"max |diff| {err:.3g}"


class Model(paddle.nn.Layer):
    """The op alone, with a parameter as its second input where it has one (a Paddle built-in
    op in the model would not run on this GPU)."""

    def __init__(self, op, params: int):
        super().__init__()
        self.op = op
        self.bias = self.create_parameter([67]) if params else None

    def forward(self, x):
        return self.op(x) if self.bias is None else self.op(x, self.bias)


def run_case(name: str, workdir: Path) -> None:
    module = opgen.load(ROOT / "examples" / name)
    op = getattr(module, name)
    two = name == "bias_gelu"
    rng = np.random.default_rng(0)
    x_np = rng.uniform(-3, 8, size=(4, 67)).astype(np.float32)
    dy_np = rng.uniform(-1, 1, size=(4, 67)).astype(np.float32)

    cpu = paddle.CPUPlace()  # explicit everywhere: a GPU build's default place is the GPU
    bias_np = rng.uniform(-1, 1, size=67).astype(np.float32) if two else None
    models = [Model(op, two), Model(op, two)]  # eager, and the one to_static converts
    for model in models:
        model.to(device=DEVICE)
        if two:  # from the host: Paddle's initializer kernels do not run on this GPU
            model.bias.set_value(bias_np)
    # the reference: the same op's CPU kernels, eager
    xc = paddle.to_tensor(x_np, place=cpu, stop_gradient=False)
    args_c = [xc] + ([paddle.to_tensor(bias_np, place=cpu, stop_gradient=False)] if two else [])
    yc = op(*args_c)
    dyc = paddle.to_tensor(dy_np, place=cpu)
    ref_grads = [g.numpy() for g in paddle.grad([yc], args_c, grad_outputs=[dyc])]
    ref = yc.numpy()

    place = paddle.CUDAPlace(0) if DEVICE.startswith("gpu") else paddle.CPUPlace()
    spec = [paddle.static.InputSpec([None, 67], "float32", "x")]
    static = paddle.jit.to_static(models[1], input_spec=spec, full_graph=True)
    for label, m, model in (("eager", models[0], models[0]), ("to_static", static, models[1])):
        x = paddle.to_tensor(x_np, place=place, stop_gradient=False)
        y = m(x)
        check(f"{name} {label} forward on {DEVICE}", *close(y.numpy(), ref))
        params = [x] + ([model.bias] if two else [])
        grads = paddle.grad([y], params, grad_outputs=[paddle.to_tensor(dy_np, place=place)])
        for what, g, want in zip(["x", "bias"], grads, ref_grads, strict=False):
            check(f"{name} {label} grad_{what} on {DEVICE}", *close(g.numpy(), want, 1e-5))

    prefix = workdir / name / "model"
    paddle.jit.save(static, str(prefix))
    np.save(workdir / name / "x.npy", x_np)
    for way in ("jit.load", "predictor"):
        if way == "predictor" and not two and paddle.__version__.startswith("2."):
            # relu6's model here has no parameter (a Paddle op would compute with it), and
            # Paddle 2.6's predictor cannot load a model with none (docs/deploy.md, "Limits")
            print(f"skip {name} saved model, predictor: Paddle 2.6 and no parameters", flush=True)
            continue
        code = f"""
import json, sys, numpy as np, paddle, opgen
opgen.register({str(ROOT / 'examples' / name)!r})
x = np.load({str(workdir / name / 'x.npy')!r})
if {way!r} == "jit.load":
    model = opgen.load_model({str(prefix)!r})
    place = {'paddle.CUDAPlace(0)' if DEVICE.startswith('gpu') else 'paddle.CPUPlace()'}
    y = model(paddle.to_tensor(x, place=place)).numpy()
else:
    from paddle import inference
    opgen.check_model({str(prefix)!r})
    program = {str(prefix)!r} + (".json" if paddle.__version__ >= "3" else ".pdmodel")
    config = inference.Config(program, {str(prefix)!r} + ".pdiparams")
    {'config.enable_use_gpu(256, 0)' if DEVICE.startswith('gpu') else 'config.disable_gpu()'}
    predictor = inference.create_predictor(config)
    predictor.get_input_handle(predictor.get_input_names()[0]).copy_from_cpu(x)
    predictor.run()
    y = predictor.get_output_handle(predictor.get_output_names()[0]).copy_to_cpu()
np.save({str(workdir / name / 'y.npy')!r}, y)
"""
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                timeout=300)
        if result.returncode != 0:
            check(f"{name} saved model, {way}, fresh process, {DEVICE}", False,
                  result.stderr.strip().splitlines()[-1] if result.stderr.strip() else "crashed")
            continue
        check(f"{name} saved model, {way}, fresh process, {DEVICE}",
              *close(np.load(workdir / name / "y.npy"), ref, 1e-5))

    # AMP: inputs in the dtype the op computes in (spec amp: follow: the inputs' own), so no
    # cast runs; float32 inputs under O2 stay float32 (Paddle casts nothing into the op).
    for level in ("O1", "O2"):
        for dtype in ("float32", "bfloat16", "float16"):
            xs = paddle.to_tensor(x_np, place=cpu).astype(dtype)
            args_cpu = [xs] + ([paddle.to_tensor(bias_np, place=cpu).astype(dtype)] if two else [])
            want = op(*args_cpu)
            args = [t.cuda(0) if DEVICE.startswith("gpu") else t for t in args_cpu]
            with paddle.amp.auto_cast(level=level, dtype="bfloat16" if dtype != "float16"
                                      else "float16"):
                got = op(*args)
            same = close(got.cpu().astype("float32").numpy(), want.astype("float32").numpy(), 0)
            check(f"{name} auto_cast {level}, {dtype} inputs -> {got.dtype}",
                  got.dtype == want.dtype and same[0], same[1])

    if not two and paddle.__version__.startswith("2."):  # its eager entry ignores SetInplaceMap
        try:
            module.relu6_(paddle.to_tensor(x_np, place=place))
            check("relu6_ on Paddle 2.6 refuses (NotImplementedError)", False)
        except NotImplementedError:
            check("relu6_ on Paddle 2.6 refuses (NotImplementedError)", True)
    elif not two:
        x = paddle.to_tensor(x_np, place=place)
        address = x.data_ptr()
        y = module.relu6_(x)
        check(f"relu6_ in place on {DEVICE} (same memory, relu6's values)",
              y.data_ptr() == address and close(x.numpy(), ref, 0)[0])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--device", default="gpu:0", choices=["gpu:0", "cpu"])
    args = parser.parse_args()
    global DEVICE
    DEVICE = args.device
    print(f"paddle {paddle.__version__}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("relu6", "bias_gelu"):
            (Path(tmp) / name).mkdir()
            try:
                run_case(name, Path(tmp))
            except Exception as err:  # a crash of one case is reported, the other still runs
                check(f"{name}: ran to the end", False, f"{type(err).__name__}: {err}"[:300])
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "deploy.json").write_text(json.dumps({"failures": failures}, indent=1))
    print(f"{len(failures)} failed" if failures else "all passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
