"""opgen: Paddle custom operators from a YAML spec.

>>> import opgen
>>> ops = opgen.load("examples/relu6")   # builds once (cached), returns the Python wrapper module
>>> y = ops.relu6(x, threshold=6.0)
>>> opgen.register("examples/relu6")   # before paddle.jit.load or a predictor (docs/deploy.md)
>>> model = opgen.load_model("exported/net")   # checks its custom ops are registered first
"""

__version__ = "0.1.0"

from .api import generate, new, test  # noqa: E402
from .api import load_op as load  # noqa: E402
from .deploy import check_model, load_model, register  # noqa: E402
from .errors import OpgenError  # noqa: E402

__all__ = ["OpgenError", "__version__", "check_model", "generate", "load", "load_model", "new",
           "register", "test"]
