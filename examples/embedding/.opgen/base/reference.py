"""numpy references of embedding: what its generated tests compare the op with.

This file is yours: opgen wrote it once from the spec and never replaces it (a spec change
is merged into it, as into the kernels). One function per output and one per input gradient, named
after them. Each takes the inputs as numpy arrays (float inputs in float64 holding exactly the
values the op received, integer inputs as they are), the gradients of the outputs where it is a
gradient, and the attrs; it returns an array of the output's (or input's) shape. The tests also
call it with float32 arrays, to learn how far float32 rounding moves it: computing in the dtype of
the arrays it is given (np.zeros_like, not np.zeros) lets a sum's tolerance grow with its length.
A function that still raises NotImplementedError fails the tests that need it.
"""

import numpy as np


def out(ids, table, padding_idx=-1, deterministic=False, check_ids=True):
    """out: same as table, [*ids.shape, D]."""
    raise NotImplementedError("reference.py: write out() for embedding's tests")


def grad_table(ids, table, grad_out, padding_idx=-1, deterministic=False, check_ids=True):
    """The gradient of table, given the gradients of the outputs; shaped like table."""
    raise NotImplementedError("reference.py: write grad_table() for embedding's tests")
