"""A generated op in a 2-process data-parallel step (issue 12, item 4):
``paddle.distributed.launch`` on the CPU (gloo), both ranks building the same never-built op at
once. Each rank must get the gradient a single process gets for the whole batch, and both must
load one compiled library."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import RELU6

ROOT = Path(__file__).resolve().parents[1]

WORKER = """
import json, sys
import numpy as np
import paddle
import paddle.distributed as dist
import opgen

op_dir, out_dir = sys.argv[1], sys.argv[2]
dist.init_parallel_env()
rank = dist.get_rank()
relu6 = opgen.load(op_dir, cpu_only=True).relu6  # both ranks at once: one builds, one waits


class Model(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.linear = paddle.nn.Linear(8, 4)

    def forward(self, x):
        return relu6(self.linear(x) * 4.0)


paddle.seed(7)
model = Model()
weight = model.linear.weight.numpy().copy()
bias = model.linear.bias.numpy().copy()
parallel = paddle.DataParallel(model)
x = np.random.default_rng(3).standard_normal((6, 8)).astype("float32")
mine = paddle.to_tensor(x[rank * 3:(rank + 1) * 3])
parallel(mine).sum().backward()
relu6(paddle.ones([1]))
with open("/proc/self/maps") as maps:  # the compiled library this process loaded
    library = sorted({line.split()[-1] for line in maps if line.rstrip().endswith("relu6_lib.so")})
with open(f"{out_dir}/rank{rank}.json", "w") as f:
    json.dump({"x": x.tolist(), "weight": weight.tolist(), "bias": bias.tolist(),
               "grad_weight": model.linear.weight.grad.numpy().tolist(),
               "grad_bias": model.linear.bias.grad.numpy().tolist(), "library": library}, f)
"""


@pytest.mark.build
def test_two_ranks_get_a_single_process_gradients_from_one_library(tmp_path):
    op = tmp_path / "relu6"
    shutil.copytree(RELU6, op, ignore=shutil.ignore_patterns("build", "__pycache__"))
    (tmp_path / "worker.py").write_text(WORKER)
    out = tmp_path / "out"
    out.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GLOG_minloglevel": "3"}
    result = subprocess.run(
        [sys.executable, "-m", "paddle.distributed.launch", "--nproc_per_node", "2",
         "--log_dir", str(tmp_path / "log"), str(tmp_path / "worker.py"), str(op), str(out)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    logs = "\n".join(p.read_text(errors="replace")[-3000:]
                     for p in sorted((tmp_path / "log").glob("workerlog.*")))
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:] + logs
    ranks = [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]

    # One compiled library, built once for both ranks.
    assert len(ranks[0]["library"]) == 1 and ranks[0]["library"] == ranks[1]["library"]
    assert len(list((op / "build").glob("*/*/*.so"))) == 1

    # Each rank holds the all-reduced gradient: what one process gets for the whole batch,
    # averaged over the two ranks as DataParallel does.
    x = np.array(ranks[0]["x"], np.float64)
    weight = np.array(ranks[0]["weight"], np.float64)
    z = (x @ weight + np.array(ranks[0]["bias"])) * 4.0
    dz = 4.0 * ((z > 0) & (z < 6))
    want_weight, want_bias = x.T @ dz / 2, dz.sum(axis=0) / 2
    for rank in ranks:
        assert rank["weight"] == ranks[0]["weight"]  # one seed, one model
        np.testing.assert_allclose(rank["grad_weight"], want_weight, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(rank["grad_bias"], want_bias, rtol=1e-5, atol=1e-5)
    assert ranks[0]["grad_weight"] == ranks[1]["grad_weight"]
    assert dz.any() and not dz.all()  # the batch crosses relu6's kinks: a real test of them
