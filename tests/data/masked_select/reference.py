"""numpy references of masked_select: what its generated tests compare the op with."""

import numpy as np


def out(x, mask):
    """out: same as x, [-1]: x's elements where mask is true, in order."""
    return x[mask.astype(bool)]


def index(x, mask):
    """index: int64, [-1, 2]: the row (over x's leading dims) and column of each."""
    rows, columns = np.nonzero(np.reshape(mask, (-1, mask.shape[-1])))
    return np.stack([rows, columns], axis=1)


def grad_x(x, mask, grad_out, grad_index):
    """The gradient of x: grad_out back where each element came from, zeros elsewhere."""
    grad = np.zeros_like(x)
    grad[mask.astype(bool)] = grad_out
    return grad
