"""Naming rules: which identifiers a spec may use, and which op names Paddle already owns."""

from __future__ import annotations

import functools
import keyword
import re
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Protocol

from . import probe
from .errors import ToolchainError, UsageError
from .expr import FUNCTIONS

IDENTIFIER = re.compile(r"^[a-z][a-z0-9_]*$")
#: The longest name a spec may give the op, an input, output, attr or intermediate: file names
#: (``test_<name>.py``), C++ identifiers and the starting spec's summary are made from them.
MAX_NAME = 64

_CPP_KEYWORDS_TEXT = """
alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t
char32_t class compl concept const consteval constexpr constinit const_cast continue co_await
co_return co_yield decltype default delete do double dynamic_cast else enum explicit export extern
false float for friend goto if inline int long mutable namespace new noexcept not not_eq nullptr
operator or or_eq private protected public register reinterpret_cast requires return short signed
sizeof static static_assert static_cast struct switch template this thread_local throw true try
typedef typeid typename union unsigned using virtual void volatile wchar_t while xor xor_eq
"""
CPP_KEYWORDS = frozenset(_CPP_KEYWORDS_TEXT.split())

# Lower-case macros that the generated C++ sees: glibc's and libstdc++'s through
# paddle/extension.h (listed with `g++ -dM -E`), and `linux`/`unix`, which GCC defines in its GNU
# modes. The preprocessor rewrites a name equal to one: `MT errno` becomes
# `MT (*__errno_location ())`, and an attr `offsetof` breaks its functor's constructor.
_C_MACROS_TEXT = """
alloca assert assert_perror be16toh be32toh be64toh errno htobe16 htobe32 htobe64 htole16 htole32
htole64 issubnormal le16toh le32toh le64toh linux math_errhandling offsetof pthread_cleanup_pop
pthread_cleanup_pop_restore_np pthread_cleanup_push pthread_cleanup_push_defer_np sched_priority
st_atime st_ctime st_mtime stderr stdin stdout strdupa strndupa timeradd timerclear timercmp
timerisset timersub unix va_arg va_copy va_end va_start
"""
C_MACROS = frozenset(_C_MACROS_TEXT.split())

# Names the generated C++ and Python use themselves; a spec name equal to one would shadow it.
# The second group are the generated tests' own locals and helpers, which an input of that name
# would overwrite.
GENERATED_NAMES = frozenset({
    "opgen", "paddle", "std", "np", "math", "pytest", "mt", "place", "stream", "numel", "dtype",
    "self", "cls", "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "size_t", "half", "nan",
    "inf", "true", "false", "none", "null", "assert", "print", "len", "range", "input", "sum",
    "float16", "bfloat16", "float32", "float64",
    "ot", "rng", "shape", "device", "attrs", "outputs", "expected", "as_tuple",
    "reference_forward", "reference_backward",
    # Python built-ins that the generated wrappers (str, tuple, isinstance, all, enumerate) and
    # tests (zip, list) call inside functions whose parameters or locals are the spec's names
    # (tests/test_python_names.py finds them); the tests' loop variables (`for name, got, want,
    # err in zip(...)` would rebind an input called got) and the locals they assign while the
    # spec's inputs are still in use.
    "str", "tuple", "zip", "list", "isinstance", "all", "enumerate",
    "name", "got", "want", "err", "spread", "grads",
    # the rowwise references' shape of the op (`op_shape = np.shape(x)` rebound an input so named)
    "op_shape",
    # the custom kind's entry points hand their kernels `args`
    "args",
})


#: How the header groups of c_names.txt read in a message.
_C_GROUPS = {"<cmath>": "<cmath>", "paddle/extension.h": "paddle/extension.h",
             "CUDA": "CUDA's headers"}


@functools.cache
def c_names() -> dict[str, tuple[str, str]]:
    """Names an op cannot take in the generated C++: name -> (kind, header group).

    ``kind`` is ``namespace`` for a name that the headers declare at global scope (the op's
    ``namespace sincos`` would redeclare <cmath>'s sincos) or ``header`` for the stem of a header
    they include (``csrc/features.h`` would replace glibc's <features.h>). Read from
    ``c_names.txt``, which scripts/c_names.py finds by compiling against the real headers.
    """
    names: dict[str, tuple[str, str]] = {}
    section: tuple[str, str] | None = None
    for line in (Path(__file__).with_name("c_names.txt")).read_text().splitlines():
        if line.startswith("["):
            kind, group = line.strip("[]").split(" ", 1)
            section = (kind, group)
        elif section is not None and line and not line.startswith("#"):
            for name in line.split():
                names.setdefault(name, section)
    return names


def _c_name_problem(name: str) -> str | None:
    """Why the generated C++ of an op called ``name`` would not compile, or None."""
    found = c_names().get(name)
    if found is None:
        return None
    kind, group = found
    alternative = next(alt for alt in (f"{name}_op", f"{name}_fn", f"my_{name}")
                       if alt not in c_names())
    if kind == "namespace":
        why = f"is declared at global scope by {_C_GROUPS.get(group, group)}, so the " \
            f"generated `namespace {name}` would not compile"
    else:
        why = f"would name csrc/{name}.h, which would replace the system header <{name}.h> " \
            f"that {_C_GROUPS.get(group, group)} include{'s' if group != 'CUDA' else ''}"
    return f"op name '{name}' {why}; use '{alternative}'"


def camel_case(name: str) -> str:
    """The op's C++ prefix: ``fused_gelu`` -> ``FusedGelu`` (``Op`` for a name of underscores)."""
    return "".join(part.capitalize() for part in name.split("_") if part) or "Op"


def identifier_problem(name: object, *, what: str) -> str | None:
    """Why ``name`` cannot name a ``what`` (an input, output, attr or the op), or None if it can."""
    if not isinstance(name, str):
        return f"{what} name must be a string, got {name!r}"
    if not name:
        return f"{what} name is empty"
    if len(name) > MAX_NAME:
        return f"{what} name '{name[:24]}...' has {len(name)} characters, more than {MAX_NAME}"
    if not IDENTIFIER.match(name):
        return f"{what} name '{name}' {_spelling_problem(name)}"
    if keyword.iskeyword(name) or keyword.issoftkeyword(name):
        return f"{what} name '{name}' is a Python keyword"
    if name in CPP_KEYWORDS:
        return f"{what} name '{name}' is a C++ keyword"
    if name in C_MACROS:
        return f"{what} name '{name}' is a C macro, which the compiler would expand in the " \
            "generated C++"
    if name in FUNCTIONS:
        return f"{what} name '{name}' is a function of the expression language"
    if name in GENERATED_NAMES:
        return f"{what} name '{name}' is reserved: the generated code uses it"
    if what == "op" and _c_name_problem(name):
        return _c_name_problem(name)
    if name.startswith("grad_") and what != "op":
        return f"{what} name '{name}' is reserved: 'grad_<output>' names the output gradients"
    if name.endswith("_"):
        return f"{what} name '{name}' must not end with '_'"
    if name.endswith("_np") and what in ("input", "output"):
        # test_<op>.py keeps the numpy copy of input x (and of grad_out) in x_np (grad_out_np)
        return f"{what} name '{name}' is reserved: the generated tests name the numpy copy of " \
            f"'{name[:-3]}' so"
    return None


def derived_name_problem(name: str, what: str, tensors: Sequence[str],
                         float_attrs: Sequence[str]) -> str | None:
    """Why ``name`` cannot name a ``what`` beside the op's ``tensors`` (inputs and outputs) and
    float attrs, or None: the generated C++ names a tensor x's shape and dtype ``x_shape`` and
    ``x_dtype``, and passes a float attr t as its bits in ``t_bits``."""
    stem, _, suffix = name.rpartition("_")
    if suffix in ("shape", "dtype") and stem in tensors:
        return f"{what} name '{name}' is reserved: the generated C++ names {stem}'s {suffix} " \
            f"'{name}'"
    if suffix == "bits" and stem in float_attrs:
        return f"{what} name '{name}' is reserved: the generated C++ passes float attr " \
            f"'{stem}' as its bits in '{name}'"
    return None


def _spelling_problem(name: str) -> str:
    """What breaks the snake_case rule in ``name``, which does not match :data:`IDENTIFIER`."""
    if any("A" <= c <= "Z" for c in name):
        # CamelCase has one obvious snake_case; an acronym (ReLU6) has none to suggest.
        snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()
        obvious = IDENTIFIER.match(snake) and not re.search(r"[A-Z]{2}", name)
        return "must be snake_case, without capitals" + (f", e.g. '{snake}'" if obvious else "")
    if not ("a" <= name[0] <= "z"):
        return "must start with a lower-case letter"
    bad = next(c for c in name if not ("a" <= c <= "z" or "0" <= c <= "9" or c == "_"))
    return f"contains {bad!r}: use only a-z, 0-9 and _"


def op_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a registered op name, or None if it can.

    Paddle pastes the op name into C++ identifiers and makes it a Python function of the loaded
    module, so it must be a C identifier and no keyword of either language.
    """
    if not (name.isascii() and name.isidentifier()):
        return f"op_name '{name}' is not a C identifier (letters, digits and _)"
    if keyword.iskeyword(name):
        return f"op_name '{name}' is a Python keyword"
    if name in CPP_KEYWORDS:
        return f"op_name '{name}' is a C++ keyword"
    if "_grad" in name:
        # paddle.utils.cpp_extension reads registered names with re.sub('_grad', '', name) to
        # tell gradient ops apart, so custom_sq_grad and custom_grad_sq both fail to load.
        return f"op_name '{name}' contains '_grad', which Paddle reserves for gradient ops: " \
            "the built library would fail to load"
    return None


def paddle_builtin_ops() -> frozenset[str]:
    """Names of every op registered by the installed Paddle, from its own registry.

    Read by :func:`opgen.probe.ask_paddle` (in a subprocess, so this process stays free of Paddle;
    cached). Empty when Paddle is not installed: then nothing can clash.

    Raises :class:`~opgen.errors.ToolchainError` when Paddle is installed but its registry cannot
    be read (it fails to import, say): an op_name that replaces a built-in op breaks that op for
    every user of the process, so an unchecked name is not let through silently.
    """
    version = probe.paddle_version()
    if version is None:
        return frozenset()
    answer = probe.ask_paddle()
    if answer.info is not None and answer.info.ops:
        return answer.info.ops
    why = (answer.error if answer.info is None else answer.info.ops_error) or "no op names"
    raise ToolchainError(
        f"cannot read the op registry of the installed Paddle {version} ({sys.executable}) "
        f"to check op_name against Paddle's built-in ops: {why}; repair the Paddle install "
        "(or uninstall it to generate without this check)")


def modules_paddle_loads() -> frozenset[str]:
    """The top-level modules that importing the installed Paddle, its ``cpp_extension`` (an op's
    setup.py) and pytest (its tests) loads (:func:`opgen.probe.ask_paddle`; cached); empty when
    Paddle is missing or does not answer."""
    if probe.paddle_version() is None:
        return frozenset()
    info = probe.ask_paddle().info
    return info.modules if info is not None else frozenset()


def free_op_name(name: str, taken: frozenset[str]) -> str:
    """A registered op name near ``name`` that ``taken`` holds neither as is nor with ``_grad``."""
    candidate = name if name.startswith("custom_") else f"custom_{name}"
    i = 2
    while candidate in taken or f"{candidate}_grad" in taken:
        candidate = f"custom_{name}_{i}"
        i += 1
    return candidate


class _BuiltOp(Protocol):
    """What :func:`check_one_build` reads of an op: a loaded :class:`~opgen.spec.Spec` has it."""

    @property
    def name(self) -> str: ...

    @property
    def op_name(self) -> str: ...

    @property
    def path(self) -> Path: ...


def one_build_clashes(ops: Iterable[_BuiltOp]) -> list[str]:
    """Why ``ops`` cannot be compiled into one library, one line per clash (empty if they can).

    In one library every op registers ``op_name`` and ``op_name + "_grad"`` with Paddle, puts
    ``csrc/<name>.*`` and the Python module ``<name>`` on disk, and defines C++ functions named
    after ``CamelCase(name)``: two ops may share none of these.
    """
    problems: list[str] = []
    # Each namespace maps a key to the op (and the role) that took it first.
    taken: dict[str, dict[str, str]] = {"paddle": {}, "files": {}, "c++": {}}
    for op in ops:
        who = f"op {op.name} ({op.path})"
        for space, role, key in (("paddle", "op_name", op.op_name),
                                 ("paddle", "gradient op", f"{op.op_name}_grad"),
                                 ("files", "name", op.name),
                                 ("c++", "C++ prefix", camel_case(op.name))):
            first = taken[space].get(key)
            if first is None:
                taken[space][key] = f"{who} as its {role}"
            else:
                problems.append(f"{role} '{key}' of {who} is already taken by {first}")
    return problems


def check_one_build(ops: Iterable[_BuiltOp]) -> None:
    """Refuse (:class:`~opgen.errors.UsageError`) ops that cannot share one library: see
    :func:`one_build_clashes`. Otherwise the mistake shows only after the compile: Paddle 3.3
    aborts the whole process (SIGABRT, "meta info register failed") when a library holding two
    ops of one name loads, and the linker rejects two definitions of one C++ function."""
    problems = one_build_clashes(ops)
    if problems:
        raise UsageError("these ops cannot be built together: " + "; ".join(problems))
