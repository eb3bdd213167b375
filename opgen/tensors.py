"""Paddle tensors made from numpy on the host and read back: what the generated tests
(:mod:`opgen.testing`) and ``opgen bench`` share. Needs Paddle and numpy, never pytest.

Data always crosses to a device by a host-to-device copy: on a GPU whose arch the installed Paddle
has no kernels for, Paddle's own ops write nothing, but copies and custom ops work.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np


def place(device: str) -> Any:
    """Paddle's place for ``device``: the CPU, or the GPU numbered by OPGEN_TEST_GPU (default 0)."""
    import paddle

    if device == "cpu":
        return paddle.CPUPlace()
    index = int(os.environ.get("OPGEN_TEST_GPU", "0"))
    return paddle.CUDAPlace(index)


def to_paddle(array: np.ndarray, dtype: str, device: str, *, stop_gradient: bool = True) -> Any:
    """A Paddle tensor of ``dtype`` on ``device`` holding ``array``, made on the host and copied."""
    import paddle

    host = np.ascontiguousarray(array).reshape(np.shape(array))  # keeps 0-D arrays 0-D
    if dtype == "bfloat16":  # numpy has no bfloat16: cast on the CPU, then copy
        tensor = paddle.to_tensor(host.astype(np.float32), place=paddle.CPUPlace())
        tensor = tensor.astype("bfloat16")
        if device != "cpu":
            tensor = tensor._copy_to(place(device), True)
    else:
        tensor = paddle.to_tensor(host.astype(dtype), place=place(device))
    tensor.stop_gradient = stop_gradient
    return tensor


def to_numpy(tensor: Any) -> np.ndarray:
    """The values of ``tensor`` as a float64 numpy array, read on the host."""
    values = np.asarray(tensor.numpy())
    if str(tensor.dtype).endswith("bfloat16") and values.dtype == np.uint16:
        # Paddle hands bfloat16 out as its bits, the high half of a float32. (Not through
        # tensor.cpu(): with a tensor on gpu:1, Paddle 2.6's copy failed with "Source place and
        # context place do not match".)
        bits = values.astype(np.uint32).reshape(-1) << np.uint32(16)
        return bits.view(np.float32).reshape(values.shape).astype(np.float64)
    return values.astype(np.float64)
