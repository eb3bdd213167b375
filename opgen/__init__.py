"""opgen: Paddle custom operators from a YAML spec.

>>> import opgen
>>> ops = opgen.load("examples/relu6")   # builds once (cached), returns the Python wrapper module
>>> y = ops.relu6(x, threshold=6.0)
>>> opgen.register("examples/relu6")   # before paddle.jit.load or a predictor (docs/deploy.md)
>>> model = opgen.load_model("exported/net")   # checks its custom ops are registered first
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from .api import generate, new, test
    from .api import load_op as load
    from .deploy import check_model, load_model, register
    from .errors import OpgenError

__all__ = ["OpgenError", "__version__", "check_model", "generate", "load", "load_model", "new",
           "register", "test"]

#: Where each name of the package's API lives, as (module, attribute). Imported on first use: a
#: generated op loads its library through opgen.build, which must not pay for the spec, the
#: templates and pydantic (about a second of a first call, docs/benchmarks.md "Start-up").
_LAZY = {"generate": ("api", "generate"), "new": ("api", "new"), "test": ("api", "test"),
         "load": ("api", "load_op"), "check_model": ("deploy", "check_model"),
         "load_model": ("deploy", "load_model"), "register": ("deploy", "register"),
         "OpgenError": ("errors", "OpgenError")}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'opgen' has no attribute {name!r}")
    module, attribute = _LAZY[name]
    value = getattr(importlib.import_module(f".{module}", __name__), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
