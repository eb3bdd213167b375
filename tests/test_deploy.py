"""opgen/deploy.py without a build: reading a saved model's custom ops, and the errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import run_opgen

import opgen
from opgen import deploy
from opgen.errors import DeployError, UsageError

ROOT = Path(__file__).resolve().parents[1]


def _pir_model(tmp_path, ops):
    """A Paddle 3 ``.json`` program (the shape paddle.jit.save writes) calling ``ops``."""
    inner = {"#": "1.if", "regions": [{"blocks": [{"ops": [{"#": op} for op in ops[1:]]}]}]}
    program = {"base_code": {"magic": "pir", "version": 4},
               "program": {"regions": [{"blocks": [{"ops": [
                   {"#": "p"}, {"#": "1.data"}, {"#": ops[0]}, inner, {"#": "1.fetch"}]}]}]}}
    (tmp_path / "model.json").write_text(json.dumps(program))
    return tmp_path / "model"


def test_custom_ops_are_read_from_a_paddle3_program_nested_blocks_included(tmp_path):
    model = _pir_model(tmp_path, ["3.custom_relu6", "3.custom_bias_gelu", "1.matmul"])
    assert deploy.saved_op_names(model) == ["custom_bias_gelu", "custom_relu6"]
    assert deploy.saved_op_names(tmp_path / "model.json") == ["custom_bias_gelu", "custom_relu6"]


def test_an_unregistered_op_is_named_with_how_to_register_it(tmp_path):
    model = _pir_model(tmp_path, ["3.custom_never_registered_op"])
    with pytest.raises(DeployError, match=r"needs custom op custom_never_registered_op, not "
                                          r"registered in this process; .*opgen\.register"):
        opgen.check_model(model)
    with pytest.raises(DeployError, match="custom_never_registered_op"):
        opgen.load_model(model)  # before paddle.jit.load, which would crash


def test_a_model_of_builtin_ops_passes_the_check(tmp_path):
    opgen.check_model(_pir_model(tmp_path, ["1.relu", "1.matmul"]))


def test_a_missing_or_broken_model_is_a_clear_error(tmp_path):
    with pytest.raises(DeployError, match=r"no saved model there \(expected .*model\.json"):
        opgen.check_model(tmp_path / "model")
    (tmp_path / "model.json").write_text("{not json")
    with pytest.raises(DeployError, match="not a Paddle program saved by paddle.jit.save"):
        opgen.check_model(tmp_path / "model")


def test_register_refuses_what_is_not_a_library(tmp_path):
    (tmp_path / "notes.txt").write_text("")
    with pytest.raises(UsageError, match="not an op folder, a wheel"):
        opgen.register(tmp_path / "notes.txt")
    with pytest.raises(UsageError, match="no such op folder, file or importable module"):
        opgen.register("no_such_op_module_anywhere")
    (tmp_path / "broken.whl").write_bytes(b"not a zip")
    with pytest.raises(UsageError, match="cannot read the wheel"):
        opgen.register(tmp_path / "broken.whl")


# A saved model served by several processes at once, and by an installed wheel. Each runs in
# child processes: the pytest process never registers these ops (Paddle aborts when a second
# build of an op name registers in a process that has one).
_TWO_WORKERS = """
import multiprocessing, sys
import numpy as np

ROOT, PREFIX = sys.argv[1], sys.argv[2]


def serve(seed):
    import opgen, paddle
    opgen.register(f"{ROOT}/examples/relu6")
    opgen.register(f"{ROOT}/examples/bias_gelu")
    model = opgen.load_model(PREFIX)
    x = np.random.default_rng(seed).uniform(-3, 8, size=(5, 8)).astype("float32")
    return x, model(paddle.to_tensor(x)).numpy()


if __name__ == "__main__":
    import opgen, paddle
    relu6 = opgen.load(f"{ROOT}/examples/relu6").relu6
    bias_gelu = opgen.load(f"{ROOT}/examples/bias_gelu").bias_gelu

    class Net(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.fc = paddle.nn.Linear(8, 8)

        def forward(self, x):
            return bias_gelu(relu6(self.fc(x), threshold=4.0), self.fc.bias)

    net = Net()
    spec = [paddle.static.InputSpec([None, 8], "float32", "x")]
    paddle.jit.save(paddle.jit.to_static(net, input_spec=spec, full_graph=True), PREFIX)
    # close and join, not the with block's terminate(): a SIGTERM that reaches a worker while it
    # is exiting runs Paddle's signal handler inside free() at exit, and it deadlocks on malloc
    pool = multiprocessing.get_context("spawn").Pool(2)
    results = pool.map(serve, [1, 2])
    pool.close()
    pool.join()
    for x, y in results:
        np.testing.assert_array_equal(y, net(paddle.to_tensor(x)).numpy())
    assert not np.array_equal(results[0][1], results[1][1])
    print("served by", len(results), "processes")
"""


@pytest.mark.build
def test_a_saved_model_is_served_by_two_spawned_processes_at_once(tmp_path):
    """Two workers (multiprocessing, spawn) each register the ops and load the model at once:
    each gives eager's outputs for its own inputs."""
    script = tmp_path / "serve.py"
    script.write_text(_TWO_WORKERS)
    env = {**os.environ, "GLOG_minloglevel": "3", "CUDA_VISIBLE_DEVICES": "",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, str(script), str(ROOT), str(tmp_path / "net")],
                            capture_output=True, text=True, env=env, check=False)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert "served by 2 processes" in result.stdout


_FROM_THE_WHEEL = """
import sys
import numpy as np
import paddle
import relu6  # the installed wheel: importing it registers custom_relu6
assert "opgen" not in sys.modules and "csrc" not in relu6.__file__
model = paddle.jit.load(sys.argv[1])
x = np.linspace(-3, 9, 24, dtype="float32").reshape(3, 8)
np.save(sys.argv[2], model(paddle.to_tensor(x)).numpy())
"""


@pytest.mark.build
def test_an_installed_wheel_registers_the_op_before_jit_load(tmp_path):
    """`opgen build --wheel`, installed (pip --target), imported by a fresh process that has no
    opgen: the saved model loads and gives the outputs of the process that saved it."""
    dist, site = tmp_path / "dist", tmp_path / "site"
    result = run_opgen("build", str(ROOT / "examples" / "relu6"), "--cpu-only", "--wheel",
                       "--wheel-dir", str(dist))
    assert result.returncode == 0, result.stderr[-2000:]
    (wheel,) = dist.glob("*.whl")
    install = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                              "--target", str(site), str(wheel)], capture_output=True, text=True,
                             check=False)
    assert install.returncode == 0, install.stderr[-2000:]
    save = f"""
import numpy as np, paddle, sys
sys.path.insert(0, {str(site)!r})
import relu6
class Net(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc = paddle.nn.Linear(8, 8)

    def forward(self, x):
        return relu6.relu6(self.fc(x), threshold=2.0)

net = Net()
spec = [paddle.static.InputSpec([None, 8], "float32", "x")]
paddle.jit.save(paddle.jit.to_static(net, input_spec=spec, full_graph=True),
                {str(tmp_path / "model")!r})
x = np.linspace(-3, 9, 24, dtype="float32").reshape(3, 8)
np.save({str(tmp_path / "want.npy")!r}, net(paddle.to_tensor(x)).numpy())
"""
    env = {**os.environ, "GLOG_minloglevel": "3", "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": ""}
    (tmp_path / "save.py").write_text(save)  # to_static reads the source of what it converts
    saved = subprocess.run([sys.executable, str(tmp_path / "save.py")], capture_output=True,
                           text=True, env=env, cwd=tmp_path, check=False)
    assert saved.returncode == 0, saved.stderr[-3000:]
    served = subprocess.run([sys.executable, "-c", _FROM_THE_WHEEL, str(tmp_path / "model"),
                             str(tmp_path / "got.npy")], capture_output=True, text=True,
                            env={**env, "PYTHONPATH": str(site)}, cwd=tmp_path, check=False)
    assert served.returncode == 0, served.stderr[-3000:]
    np.testing.assert_array_equal(np.load(tmp_path / "got.npy"), np.load(tmp_path / "want.npy"))


def test_an_in_place_op_is_found_under_the_name_paddle3_writes(tmp_path, monkeypatch):
    """Paddle 3 writes an in-place custom op with a trailing underscore (custom_relu6_inplace_):
    registered as custom_relu6_inplace, it passes the check."""
    model = _pir_model(tmp_path, ["3.custom_relu6_inplace_"])
    monkeypatch.setattr(deploy, "_registered", lambda: {"custom_relu6_inplace"})
    opgen.check_model(model)
    monkeypatch.setattr(deploy, "_registered", lambda: set())
    with pytest.raises(DeployError, match="custom_relu6_inplace_"):
        opgen.check_model(model)
