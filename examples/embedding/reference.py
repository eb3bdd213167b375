"""numpy references of embedding: what its generated tests compare the op with.

This file is yours: opgen wrote it once from the spec and never replaces it (a spec change
is merged into it, as into the kernels). One function per output and one per input gradient, named
after them. Each takes the inputs as numpy arrays (float inputs in float64 holding exactly the
values the op received, integer inputs as they are), the gradients of the outputs where it is a
gradient, and the attrs; it returns an array of the output's (or input's) shape. The tests also
call it with float32 arrays, to learn how far float32 rounding moves it: computing in the dtype of
the arrays it is given (np.zeros_like, not np.zeros) lets a sum's tolerance grow with its length.
"""

import numpy as np


def out(ids, table, padding_idx=-1, deterministic=False, check_ids=True):
    """out: same as table, [*ids.shape, D]."""
    valid = (ids >= 0) & (ids < len(table))  # out-of-range ids (unchecked) read zeros
    rows = table[np.where(valid, ids, 0)]
    rows[(ids == padding_idx) | ~valid] = 0
    return rows


def grad_table(ids, table, grad_out, padding_idx=-1, deterministic=False, check_ids=True):
    """The gradient of table, given the gradients of the outputs; shaped like table."""
    grad = np.zeros_like(table)  # in the dtype given: float32 sums show their rounding
    flat = np.reshape(ids, -1)
    valid = (flat >= 0) & (flat < len(table))
    np.add.at(grad, flat[valid], np.reshape(grad_out, (flat.size, table.shape[1]))[valid])
    if padding_idx >= 0:
        grad[padding_idx] = 0
    return grad
