"""What a generated wrapper does under paddle.amp.auto_cast, for each `amp:` of the spec: the dtype
its inputs are cast to (checked without building: the wrapper imports without its library).
The generated tests run the built op under AMP (examples/*); see docs/deploy.md, "AMP"."""

from __future__ import annotations

import importlib.util
import textwrap

import numpy as np
import paddle
import pytest

from opgen import api
from opgen import testing as ot

SPEC = """\
name: amp_{policy}
kind: elementwise
inputs: [x, y]
outputs: [out]
dtypes: {dtypes}
forward:
  out: x * y
amp: {policy}
"""


def wrapper(tmp_path, policy, dtypes="[float32, float64, float16, bfloat16]"):
    folder = tmp_path / f"amp_{policy}"
    folder.mkdir()
    (folder / f"amp_{policy}.yaml").write_text(textwrap.dedent(SPEC.format(policy=policy,
                                                                          dtypes=dtypes)))
    api.generate(folder / f"amp_{policy}.yaml")
    spec = importlib.util.spec_from_file_location(f"amp_{policy}_{id(tmp_path)}",
                                                  folder / f"amp_{policy}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cast_dtypes(module, level, amp_dtype, *dtypes):
    inputs = [paddle.to_tensor(np.ones(3), dtype=d) for d in dtypes]
    with ot.auto_cast("cpu", level, amp_dtype):
        cast = module._amp_inputs(*inputs)
    return None if cast is None else [str(t.dtype).removeprefix("paddle.") for t in cast]


F32, F16, BF16, F64 = "float32", "float16", "bfloat16", "float64"


@pytest.mark.parametrize("level", ["O1", "O2"])
@pytest.mark.parametrize(("policy", "inputs", "amp_dtype", "expected"), [
    ("follow", (F32, F32), F16, [F32, F32]),
    ("follow", (BF16, BF16), F16, [BF16, BF16]),       # as they are, whatever auto_cast's dtype
    ("follow", (F32, BF16), BF16, [F32, F32]),         # differing: float32
    ("autocast", (F32, F32), BF16, [BF16, BF16]),
    ("autocast", (F32, F16), F16, [F16, F16]),
    ("float32", (F16, BF16), F16, [F32, F32]),
    ("float32", (F64, F64), F16, [F64, F64]),          # AMP leaves float64 alone
    ("autocast", (F64, F32), BF16, [F64, F32]),
])
def test_each_policy_casts_to_its_dtype(tmp_path, level, policy, inputs, amp_dtype, expected):
    assert cast_dtypes(wrapper(tmp_path, policy), level, amp_dtype, *inputs) == expected


def test_autocast_without_the_amp_dtype_computes_in_float32(tmp_path):
    module = wrapper(tmp_path, "autocast", "[float32, bfloat16]")
    assert cast_dtypes(module, "O1", F16, F32, F32) == [F32, F32]
    assert cast_dtypes(module, "O2", BF16, F32, F32) == [BF16, BF16]


def test_nothing_is_cast_outside_auto_cast_or_where_it_has_no_effect(tmp_path):
    module = wrapper(tmp_path, "autocast")
    x = paddle.to_tensor(np.ones(3), dtype="float32")
    assert module._amp_inputs(x, x) is None  # no auto_cast
    # Paddle's own auto_cast, on the CPU: it warns and leaves AMP off
    with (pytest.warns(UserWarning, match="amp_guard can only be enabled"),
          paddle.amp.auto_cast(level="O1", dtype="bfloat16")):
        assert module._amp_inputs(x, x) is None
