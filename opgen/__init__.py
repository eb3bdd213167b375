"""opgen: Paddle custom operators from a YAML spec.

>>> import opgen
>>> ops = opgen.load("examples/relu6")   # builds once (cached), returns the Python wrapper module
>>> y = ops.relu6(x, threshold=6.0)
"""

__version__ = "0.1.0"

from .api import generate, new, test  # noqa: E402
from .api import load_op as load  # noqa: E402
from .errors import OpgenError  # noqa: E402

__all__ = ["OpgenError", "__version__", "generate", "load", "new", "test"]
