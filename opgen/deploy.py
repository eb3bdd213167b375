"""Deploying models that use generated ops: register an op library, check a saved model, load it.

A model saved with ``paddle.jit.save`` names its custom ops but does not hold their code: the
process that loads it (``paddle.jit.load``, a Paddle Inference predictor) must register each op's
library first. Without it Paddle 3.3.1's ``jit.load`` segfaults and its predictor fails with
"op [] kernel output args (0) defs should equal op outputs"; Paddle 2.6.2 says "Operator (NAME)
is not registered". So:

- :func:`register` registers one library, from what a user has at hand: a generated op folder,
  an op's wheel, its compiled ``.so``, or its installed module;
- :func:`check_model` reads the saved program's op names (the file alone, no Paddle parser) and
  raises :class:`DeployError` naming every custom op the process has not registered;
- :func:`load_model` does both, then ``paddle.jit.load``.

Importing an installed op's wrapper (from its wheel) registers its library too.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import zipfile
from pathlib import Path
from types import ModuleType

from . import build, probe
from .errors import DeployError, UsageError

# Paddle 3's serialized programs (``.json``) name each op ``<dialect id>.<op name>``; custom ops
# are dialect 3 (``custom_op``), as written by Paddle 3.3.1 (program format version 4).
_PIR_CUSTOM_DIALECT = "3"

HOW_TO_REGISTER = ("register each op's library before loading the model: "
                   "opgen.register(OP_FOLDER | OP.whl | LIBRARY.so | 'op_module'), or import "
                   "the op's installed module (e.g. `import relu6` after `pip install` of its "
                   "wheel); then load it with opgen.load_model(PATH) or create the predictor")


def register(library: str | Path | ModuleType) -> list[str]:
    """Register an op library with Paddle in this process, for ``paddle.jit.load`` and Paddle
    Inference predictors. Returns the op names this call registered (forward and grad ops;
    none when the library was registered already).

    ``library`` is a generated op folder (built if needed, as ``opgen build`` does), a wheel
    made by ``opgen build --wheel`` (its library is unpacked into opgen's cache), a compiled
    ``.so``, or an importable module name or module: an op's wrapper (``"relu6"``) or its
    library (``"relu6_lib"``). Registering a library twice is harmless.
    """
    before = _registered()
    if isinstance(library, ModuleType):
        _register_module(library)
    elif isinstance(library, Path) or Path(library).exists():
        path = Path(library)
        if path.is_dir():
            build.load_library(path)
        elif path.suffix == ".whl":
            _register_so(_unpack_wheel(path))
        elif path.suffix == ".so":
            _register_so(path)
        else:
            raise UsageError(f"{path}: not an op folder, a wheel (.whl) or a library (.so)")
    else:
        try:
            module = importlib.import_module(str(library))
        except ImportError as err:
            raise UsageError(f"{library}: no such op folder, file or importable module "
                             f"({err})") from err
        _register_module(module)
    return sorted(_registered() - before)


def saved_op_names(model: str | Path) -> list[str]:
    """The custom ops the saved model ``model`` (the prefix given to ``paddle.jit.save``, or its
    ``.json`` / ``.pdmodel`` file) calls, read from the file without Paddle's parser. Paddle 3
    writes ``PREFIX.json``; Paddle 2.6 (and Paddle 3 with PIR off) ``PREFIX.pdmodel``: there
    every op type is listed, built-in ones too."""
    path = _program_file(model)
    if path.suffix == ".json":
        try:
            program = json.loads(path.read_text())["program"]
        except (OSError, ValueError, KeyError) as err:
            raise DeployError(f"{path}: not a Paddle program saved by paddle.jit.save "
                              f"({err})") from err
        names = set()
        for name in _pir_op_names(program.get("regions", [])):
            dialect, _, op = name.partition(".")
            if dialect == _PIR_CUSTOM_DIALECT and op:
                names.add(op)
        return sorted(names)
    from paddle.base.proto import framework_pb2

    desc = framework_pb2.ProgramDesc()
    try:
        desc.ParseFromString(path.read_bytes())
    except Exception as err:  # protobuf's DecodeError, or unreadable
        raise DeployError(f"{path}: not a Paddle program saved by paddle.jit.save "
                          f"({err})") from err
    return sorted({op.type for block in desc.blocks for op in block.ops})


def check_model(model: str | Path) -> None:
    """Raise :class:`DeployError` naming every custom op the saved ``model`` needs that this
    process has not registered, and how to register it; before ``paddle.jit.load`` or a
    predictor, which would crash or fail with a misleading message instead."""
    registered = _registered()
    # Paddle 3 writes an in-place custom op (SetInplaceMap) with a trailing underscore
    missing = [op for op in saved_op_names(model) if op not in registered and
               not (op.endswith("_") and op[:-1] in registered)]
    if missing:
        ops = ", ".join(missing)
        raise DeployError(f"{model}: the model needs custom op{'s' if len(missing) > 1 else ''} "
                          f"{ops}, not registered in this process; {HOW_TO_REGISTER}")


def load_model(model: str | Path, *libraries: str | Path | ModuleType):
    """``paddle.jit.load(model)`` after registering ``libraries`` (as :func:`register` takes
    them) and checking that every custom op the model needs is registered."""
    import paddle

    for library in libraries:
        register(library)
    check_model(model)
    return paddle.jit.load(str(_prefix(model)))


def _register_module(module: ModuleType) -> None:
    ops = getattr(module, "_ops", None)
    if callable(ops):  # a generated wrapper: its library loads on first use
        ops()


def _register_so(path: Path) -> None:
    from paddle.utils.cpp_extension.extension_utils import load_op_meta_info_and_register_op

    load_op_meta_info_and_register_op(str(path))


def _unpack_wheel(wheel: Path) -> Path:
    """The wheel's op library, unpacked once into opgen's cache (keyed by the wheel's hash)."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            libraries = [n for n in archive.namelist() if n.endswith("_pd_.so") and "/" not in n]
            if len(libraries) != 1:
                raise UsageError(f"{wheel}: not an op wheel made by `opgen build --wheel` "
                                 "(no <name>_lib_pd_.so at its top level)")
            data = archive.read(libraries[0])
    except (OSError, zipfile.BadZipFile) as err:
        raise UsageError(f"{wheel}: cannot read the wheel ({err})") from err
    folder = probe.cache_dir() / "wheels" / hashlib.sha256(data).hexdigest()[:16]
    target = folder / libraries[0]
    if not target.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        staged = folder / f".{libraries[0]}.tmp"
        staged.write_bytes(data)
        staged.replace(target)
    return target


def _registered() -> set[str]:
    from paddle.base import core

    return set(core.get_all_op_names())


def _pir_op_names(regions: list) -> list[str]:
    names = []
    for region in regions:
        for block in region.get("blocks", []):
            for op in block.get("ops", []):
                names.append(str(op.get("#", "")))
                names.extend(_pir_op_names(op.get("regions", [])))
    return names


def _prefix(model: str | Path) -> Path:
    path = Path(model)
    return path.with_suffix("") if path.suffix in (".json", ".pdmodel") else path


def _program_file(model: str | Path) -> Path:
    prefix = _prefix(model)
    for suffix in (".json", ".pdmodel"):
        path = Path(f"{prefix}{suffix}")
        if path.is_file():
            return path
    raise DeployError(f"{model}: no saved model there (expected {prefix}.json from Paddle 3 or "
                      f"{prefix}.pdmodel from Paddle 2.6, written by paddle.jit.save)")
