"""``backward: auto``: the derived gradient of every function and operator of the language against
central differences in numpy float64, its kinks against Paddle's own kernels, and its text."""

from __future__ import annotations

import math
import re
import textwrap

import numpy as np
import pytest

from opgen.autodiff import backward_of, parse, partial, share_calls, share_terms, source
from opgen.errors import SpecError
from opgen.expr import FUNCTIONS
from opgen.spec import Spec, loads

NUMPY = {"np": np, "_erf": np.vectorize(math.erf, otypes=[np.float64])}

#: For each function of one argument, where its argument u is sampled (away from poles and kinks).
UNARY_DOMAINS: dict[str, tuple[float, float]] = {
    "abs": (-2, 2), "exp": (-2, 2), "log": (0.2, 3), "log1p": (-0.6, 3), "expm1": (-2, 2),
    "sqrt": (0.2, 3), "rsqrt": (0.2, 3), "tanh": (-2, 2), "sigmoid": (-4, 4), "erf": (-2, 2),
    "sin": (-3, 3), "cos": (-3, 3), "floor": (-3, 3), "ceil": (-3, 3), "softplus": (-5, 5),
    "square": (-2, 2), "sign": (-2, 2), "tan": (-1.2, 1.2), "atan": (-3, 3), "log2": (0.2, 3),
    "exp2": (-3, 3),
}
OTHER_FUNCTIONS = {"min", "max", "pow", "where", "clamp"}
#: Forwards over x and y in [lo, hi] that cover the rest of the language: operators, the
#: functions of several arguments, conditions, intermediates and several outputs.
CASES: list[tuple[str, dict[str, str], tuple[float, float]]] = [
    ("arithmetic", {"out": "x * y - x / y + -x + +y - 2 * (x - y) / 3"}, (0.5, 2)),
    ("powers", {"out": "x ** 2 + x ** 3 * y + pow(x, y) + y ** -1.5 + 2 ** x"}, (0.5, 2)),
    ("min-max", {"out": "min(x, y) * 2 + max(x * y, 0.7) + min(x, 1) + max(-x, y)"}, (-2, 2)),
    ("clamp", {"out": "clamp(x, -0.5, 0.5) + clamp(x * y, y - 1, y + 0.5) + clamp(y, x, 0.3)"},
     (-2, 2)),
    ("where", {"out": "where((x > y) & ~(y < -1) | (x < -1.5), x * y, exp(y)) + "
                      "where(-1 < x <= y, y, 0)"}, (-2, 2)),
    ("intermediates", {"s": "x * y", "c": "s > 0", "t": "tanh(s) + s",
                       "out": "where(c, t * x, s) + t"}, (-2, 2)),
    ("two outputs", {"e": "exp(x)", "out": "e * y", "out2": "e / (1 + y * y) + x"}, (-1, 1)),
    ("mish", {"sp": "softplus(x)", "out": "x * tanh(sp)"}, (-3, 3)),
]


def test_every_function_is_covered() -> None:
    assert set(UNARY_DOMAINS) | OTHER_FUNCTIONS == set(FUNCTIONS)
    covered = {name for _, forward, _ in CASES for text in forward.values()
               for name in FUNCTIONS if f"{name}(" in text}
    assert covered >= OTHER_FUNCTIONS


def _spec(forward: dict[str, str], outputs: list[str], *, attrs: str = "",
          backward: dict[str, str] | None = None) -> Spec:
    """An op of inputs x and y: ``backward: auto``, or ``backward`` written out; ``attrs`` is
    the spec's ``attrs:`` line, if any."""
    def section(entries: dict[str, str]) -> str:
        return "".join(f"  {k}: {v!r}\n" if "'" not in v else f'  {k}: "{v}"\n'
                       for k, v in entries.items())

    return loads(textwrap.dedent(f"""\
        name: derived
        kind: elementwise
        inputs: [x, y]
        outputs: [{', '.join(outputs)}]
        """) + attrs + "forward:\n" + section(forward) +
        ("backward: auto\n" if backward is None else "backward:\n" + section(backward)),
        check_builtins=False)


def _run(section: dict, env: dict[str, np.ndarray], targets: tuple[str, ...] = ()
         ) -> dict[str, np.ndarray]:
    """Evaluate a section's numpy emissions in order; a target ``x`` lands in ``grad_x``."""
    env = dict(env)
    with np.errstate(all="ignore"):
        for name, emitted in section.items():
            value = eval(emitted.numpy, NUMPY, env)  # noqa: S307
            shape = next(iter(env.values())).shape
            env[f"grad_{name}" if name in targets else name] = np.broadcast_to(value, shape)
    return env


def _check_against_differences(forward: dict[str, str], domain: tuple[float, float]) -> None:
    outputs = [k for k in forward if k.startswith("out")]
    spec = _spec(forward, outputs)
    rng = np.random.default_rng(0)
    x, y = (rng.uniform(*domain, size=400) for _ in range(2))
    grads = {f"grad_{o}": rng.uniform(-1, 1, size=400) for o in outputs}

    def loss(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        values = _run(spec.forward, {"x": x, "y": y})
        return sum(grads[f"grad_{o}"] * values[o] for o in outputs)

    got = _run(spec.backward or {}, {"x": x, "y": y, **grads}, ("x", "y"))
    h = 1e-6
    for name, (dx, dy) in (("x", (h, 0)), ("y", (0, h))):
        numeric = (loss(x + dx, y + dy) - loss(x - dx, y - dy)) / (2 * h)
        coarse = (loss(x + 2 * dx, y + 2 * dy) - loss(x - 2 * dx, y - 2 * dy)) / (4 * h)
        smooth = np.abs(numeric - coarse) <= 1e-4 * (1 + np.abs(numeric))  # no kink within 2h
        assert smooth.mean() > 0.9, (name, forward)
        np.testing.assert_allclose(got[f"grad_{name}"][smooth], numeric[smooth], rtol=1e-5,
                                   atol=1e-6, err_msg=f"d/d{name}: {spec.backward_source}")


@pytest.mark.parametrize("name", sorted(UNARY_DOMAINS))
def test_each_function_against_central_differences(name: str) -> None:
    lo, hi = UNARY_DOMAINS[name]
    # u = (x + y) / 2 stays in the domain; the chain and product rules are exercised too
    _check_against_differences({"out": f"{name}((x + y) / 2) * (y - 2.5 * x) + {name}(x)"},
                               (lo, hi))


@pytest.mark.parametrize(("label", "forward", "domain"), CASES, ids=[c[0] for c in CASES])
def test_operators_conditions_intermediates_outputs(label: str, forward: dict[str, str],
                                                    domain: tuple[float, float]) -> None:
    _check_against_differences(forward, domain)


# -- the text: it reads like a hand-written backward -----------------------------------------------

@pytest.mark.parametrize(("forward", "want"), [
    ({"out": "tanh(x)"}, {"x": "grad_out * (1 - tanh(x) ** 2)", "y": "0"}),
    ({"out": "x * y + 1"}, {"x": "grad_out * y", "y": "grad_out * x"}),
    ({"out": "x / y"}, {"x": "grad_out / y", "y": "-grad_out * x / y ** 2"}),
    ({"out": "x - y * 1 + 0"}, {"x": "grad_out", "y": "-grad_out"}),
    ({"out": "exp(-x)"}, {"x": "-grad_out * exp(-x)", "y": "0"}),
    ({"out": "clamp(x, 0, 6)"}, {"x": "where((x >= 0) & (x <= 6), grad_out, 0)", "y": "0"}),
    ({"out": "where(x > 0, x, y * expm1(x))"},
     {"x": "where(x > 0, grad_out, grad_out * y * exp(x))",
      "y": "where(x > 0, 0, grad_out * expm1(x))"}),
    ({"out": "max(x, y)"}, {"x": "where(x > y, grad_out, where(x == y, 0.5 * grad_out, 0))",
                            "y": "where(x < y, grad_out, where(x == y, 0.5 * grad_out, 0))"}),
    ({"out": "abs(x) + floor(y) + sign(y)"}, {"x": "grad_out * sign(x)", "y": "0"}),
    ({"out": "2 ** x + x ** 3"}, {"x": "grad_out * (0.6931471805599453 * 2 ** x + 3 * x ** 2)",
                                  "y": "0"}),
    ({"sp": "softplus(x)", "out": "x * tanh(sp)"},
     {"grad_sp": "grad_out * x * (1 - tanh(sp) ** 2)",
      "x": "grad_out * tanh(sp) + grad_sp * sigmoid(x)", "y": "0"}),
    ({"out": "y * tanh(x / y) + 1"}, {"x": "grad_out * (1 - tanh(x / y) ** 2)",
                                      "y": "grad_out * (tanh(x / y) - y * (1 - tanh(x / y) ** 2)"
                                           " * x / y ** 2)"}),
    ({"out": "x", "out2": "x * y"}, {"x": "grad_out2 * y + grad_out", "y": "grad_out2 * x"}),
])
def test_the_derived_text(forward: dict[str, str], want: dict[str, str]) -> None:
    outputs = [k for k in forward if k.startswith("out")]
    assert backward_of(forward, ["x", "y"], outputs) == want



# -- calls made once: what ``backward: auto`` emits ------------------------------------------------

@pytest.mark.parametrize(("section", "reserved", "known", "want"), [
    # the derivative repeats the forward's call: computed once, above its first reader
    ({"grad_u": "grad_out * (0.5 * (1 + tanh(0.8 * u)) + u * (1 - tanh(0.8 * u) ** 2))",
      "x": "grad_u"}, [], {},
     {"tanh_u": "tanh(0.8 * u)",
      "grad_u": "grad_out * (0.5 * (1 + tanh_u) + u * (1 - tanh_u ** 2))", "x": "grad_u"}),
    # innermost first: the outer call then reads the inner one's local
    ({"x": "grad_out * exp(tanh(x)) * (1 - tanh(x) ** 2) * y", "y": "grad_out * exp(tanh(x))"},
     [], {}, {"tanh_x": "tanh(x)", "exp_tanh_x": "exp(tanh_x)",
              "x": "grad_out * exp_tanh_x * (1 - tanh_x ** 2) * y", "y": "grad_out * exp_tanh_x"}),
    # a taken name is numbered; the local sits above the first entry that reads it
    ({"x": "grad_out", "y": "grad_out * exp(x) + exp(x)"}, ["exp_x"], {},
     {"x": "grad_out", "exp_x2": "exp(x)", "y": "grad_out * exp_x2 + exp_x2"}),
    # where, and cheap functions of names and numbers, stay inline; a single call too
    ({"x": "where(x > 0, y, 0) * abs(x) + where(x > 0, y, 0) * abs(x) + exp(y)"}, [], {},
     {"x": "where(x > 0, y, 0) * abs(x) + where(x > 0, y, 0) * abs(x) + exp(y)"}),
    # known values (the forward's intermediates) are read by name
    ({"x": "grad_e * exp(x)", "y": "grad_out * (x + y)"}, [], {"e": "exp(x)", "s": "x + y"},
     {"x": "grad_e * e", "y": "grad_out * s"}),
])
def test_calls_made_once(section: dict[str, str], reserved: list[str], known: dict[str, str],
                         want: dict[str, str]) -> None:
    assert share_calls(section, reserved, known) == want


@pytest.mark.parametrize(("label", "forward", "domain"), CASES, ids=[c[0] for c in CASES])
def test_calls_made_once_give_the_same_bits(label: str, forward: dict[str, str],
                                            domain: tuple[float, float]) -> None:
    """The derived backward (with its shared calls) against the same derivation written out
    by hand without them: the same values, bit for bit."""
    outputs = [k for k in forward if k.startswith("out")]
    derived = _spec(forward, outputs)
    plain = backward_of(forward, ["x", "y"], outputs)
    for local in [k for k in plain if k not in ("x", "y")]:  # a spec's own may not be grad_*
        plain = {("d" + k[4:] if k == local else k): re.sub(rf"\b{local}\b", "d" + local[4:], v)
                 for k, v in plain.items()}
    written = _spec(forward, outputs, backward=plain)
    rng = np.random.default_rng(1)
    env = {"x": rng.uniform(*domain, size=300), "y": rng.uniform(*domain, size=300),
           **{f"grad_{o}": rng.uniform(-1, 1, size=300) for o in outputs}}
    ours = _run(derived.backward or {}, env, ("x", "y"))
    theirs = _run(written.backward or {}, env, ("x", "y"))
    for name in ("grad_x", "grad_y"):
        np.testing.assert_array_equal(ours[name], theirs[name], err_msg=label)
    if label == "two outputs":  # exp(x) is the forward's e: read, not called again
        assert derived.backward_source["x"] == "grad_out2 + grad_e * e"

@pytest.mark.parametrize(("text", "wrt", "want"), [
    ("x * 1 + 0 * y", "x", "1"),
    ("log(2) * x", "x", "0.6931471805599453"),
    ("x ** 1", "x", "1"),
    ("sqrt(x)", "x", "0.5 / sqrt(x)"),
    ("rsqrt(x)", "x", "-0.5 * rsqrt(x) / x"),
    ("erf(x)", "x", "1.1283791670955126 * exp(-x ** 2)"),
    ("log2(x)", "x", "1.4426950408889634 / x"),
    ("(-2) ** x", "x", "(-2) ** x * log(-2)"),
    ("y ** 2", "x", "0"),
    # constants that overflow stay as written (the spec was refused: "unknown name 'inf'")
    ("x * 1e200 * 1e200", "x", "1e+200 * 1e+200"),
    ("x / 1e-300 / 1e-300", "x", "9.999999999999999e+299 / 1e-300"),
    ("x * 2 * 3", "x", "6"),
])
def test_simplification(text: str, wrt: str, want: str) -> None:
    assert source(partial(parse(text), wrt)) == want


# -- kinks: Paddle's own kernels -------------------------------------------------------------------

KINKS = [
    ("max", "max(x, y)", lambda p, x, y: p.maximum(x, y), [(1.0, 1.0), (2.0, 1.0), (0.5, 3.0)]),
    ("min", "min(x, y)", lambda p, x, y: p.minimum(x, y), [(1.0, 1.0), (2.0, 1.0), (0.5, 3.0)]),
    ("abs", "abs(x) + 0 * y", lambda p, x, y: p.abs(x) + 0 * y, [(0.0, 0.0), (-1.0, 0.0)]),
    ("clamp", "clamp(x, -1, 2) + 0 * y", lambda p, x, y: p.clip(x, -1.0, 2.0) + 0 * y,
     [(-1.0, 0.0), (2.0, 0.0), (3.0, 0.0), (-2.0, 0.0), (0.5, 0.0)]),
    ("floor", "floor(x) + ceil(y)", lambda p, x, y: p.floor(x) + p.ceil(y), [(1.0, 2.0)]),
    ("sign", "sign(x) + y", lambda p, x, y: p.sign(x) + y, [(0.0, 1.0), (-2.0, 1.0)]),
]


@pytest.mark.parametrize(("label", "text", "paddle_fn", "points"), KINKS,
                         ids=[k[0] for k in KINKS])
def test_kinks_follow_paddle(label, text, paddle_fn, points) -> None:
    paddle = pytest.importorskip("paddle")
    xs, ys = (np.array(p, dtype=np.float64) for p in zip(*points, strict=True))
    spec = _spec({"out": text}, ["out"])
    g = np.linspace(0.5, 1.5, len(xs))
    ours = _run(spec.backward or {}, {"x": xs, "y": ys, "grad_out": g}, ("x", "y"))
    tx, ty = (paddle.to_tensor(a, stop_gradient=False) for a in (xs, ys))
    theirs = paddle.grad([paddle_fn(paddle, tx, ty)], [tx, ty],
                         grad_outputs=[paddle.to_tensor(g)], allow_unused=True)
    for name, value in zip("xy", theirs, strict=True):
        want = np.zeros_like(xs) if value is None else value.numpy()
        np.testing.assert_array_equal(ours[f"grad_{name}"], want, err_msg=f"{label}: d/d{name}")


@pytest.mark.parametrize(("section", "want"), [
    # a function's derivative, read three times, and a factor twice: each named once, in words
    # where they say it all, else by what it reads; the larger first (it holds the smaller), and
    # written out again where what is left of it is small (0.4 * one_minus_t_sq)
    ({"a": "0.4 * (1 - t ** 2) * (1 + 0.1 * u ** 2) * grad_out",
      "b": "grad_out * (0.4 * (1 - t ** 2) - u * (1 - t ** 2)) * (1 + 0.1 * u ** 2)"},
     {"one_minus_t_sq": "1 - t ** 2", "u_term": "1 + 0.1 * u ** 2",
      "a": "0.4 * one_minus_t_sq * u_term * grad_out",
      "b": "grad_out * (0.4 * one_minus_t_sq - u * one_minus_t_sq) * u_term"}),
    # words only where they read as the source does: (1 - t) ** 2 is not 1 - t ** 2
    ({"a": "(1 - t) ** 2 * grad_out + (1 - t ** 3) * grad_out",
      "b": "(1 - t) ** 2 * grad_y + (1 - t ** 3) * grad_y"},
     {"t_term": "(1 - t) ** 2", "one_minus_t_cube": "1 - t ** 3",
      "a": "t_term * grad_out + one_minus_t_cube * grad_out",
      "b": "t_term * grad_y + one_minus_t_cube * grad_y"}),
    # what reads a gradient stays where it is (the chain rule's products), as do small terms
    ({"a": "grad_out * (u + 1) * 2", "b": "grad_out * (u + 1) * 3 + (u + 1) * (u + 1)"},
     {"a": "grad_out * (u + 1) * 2", "b": "grad_out * (u + 1) * 3 + (u + 1) * (u + 1)"}),
    # a name taken (by the spec, or the section) is numbered
    ({"one_minus_t_sq": "x", "a": "(1 - t ** 2) * one_minus_t_sq + (1 - t ** 2)"},
     {"one_minus_t_sq": "x", "one_minus_t_sq2": "1 - t ** 2",
      "a": "one_minus_t_sq2 * one_minus_t_sq + one_minus_t_sq2"}),
])
def test_shared_terms_are_computed_once(section, want) -> None:
    got = share_terms(section, ["x"])
    assert got == want
    assert list(got) == list(want)  # each local just above its first reader
    inputs = {"grad_out": 0.7, "grad_y": -0.4, "t": 0.3, "u": -1.2, "x": 2.5}
    before, after = dict(inputs), dict(inputs)
    for values, entries in ((before, section), (after, got)):
        for name, text in entries.items():
            values[name] = eval(text, {}, dict(values))  # noqa: S307 (the tests' own text)
    assert all(after[name] == before[name] for name in section)  # the same operations


def test_shared_calls_take_no_name_of_the_spec() -> None:
    """A forward intermediate already named like the local a shared call would get: the local
    is numbered, and the double backward (which differentiates the backward with its locals)
    is still derived."""
    spec = _spec({"exp_x": "x * 2", "out": "tanh(exp(x) * y) + exp_x"}, ["out"])
    assert spec.backward_source["exp_x2"] == "exp(x)"
    assert spec.backward_source["one_minus_tanh_x_y_sq"] == "1 - tanh_x_y ** 2"  # twice
    assert spec.backward_source["y"] == "grad_out * one_minus_tanh_x_y_sq * exp_x2"
    assert {"x", "y", "grad_out"} <= set(spec.double_backward_source)
    assert "exp(" not in spec.double_backward_source["x"]  # reads the backward's local


ATTR_A = "attrs: {a: {type: float, default: 0.5}}\n"


@pytest.mark.parametrize(("forward", "attrs", "local"), [
    ({"out": "0.5 * x * (1 + erf(x * rsqrt(2))) + 0 * y"}, "", None),  # a constant call: inline
    ({"out": "x * y * exp(a)"}, ATTR_A, "exp_a"),  # a call of attrs only
    ({"out": "floor(x * y) * (x + y)"}, "", "floor_x_y"),  # a call whose derivative is 0
    ({"k": "exp(a)", "out": "x * y * k"}, ATTR_A, None),
])
def test_shared_calls_keep_the_double_backward(forward: dict[str, str], attrs: str,
                                               local: str | None) -> None:
    """A shared call that reads no input, or has no derivative, never costs the op its double
    backward (the double backward differentiates the backward as derived, with its calls written
    out); nor does a forward intermediate of attrs alone, whose gradient nothing reads."""
    spec = _spec(forward, ["out"], attrs=attrs)
    assert (local in spec.backward_source) if local else \
        not set(spec.backward_source) - {"x", "y", "k"}
    assert "rsqrt =" not in " ".join(f"{k} =" for k in spec.backward_source)
    assert spec.double_backward, spec.backward_source
    assert "grad_out" in spec.double_backward_source


def test_the_double_backward_keeps_a_guarded_call_inside_its_where() -> None:
    """where(x > 0, sqrt(x) * y, 0): the backward shares sqrt(x), but the double backward's
    chain rule stays inside the where, so x <= 0 gives 0, not 0 * inf = NaN."""
    spec = _spec({"out": "where(x > 0, sqrt(x) * y, 0)"}, ["out"])
    assert spec.backward_source["sqrt_x"] == "sqrt(x)"
    env = {"x": np.array([-1.0, 0.0, 2.0]), "y": np.ones(3), "grad_out": np.ones(3),
           "grad_grad_x": np.ones(3), "grad_grad_y": np.ones(3)}
    got = _run(spec.double_backward or {}, env, ("x", "y", "grad_out"))
    np.testing.assert_allclose(got["grad_x"], [0.0, 0.0, -0.25 / 2 ** 1.5 + 0.5 / 2 ** 0.5])


def test_a_local_is_named_after_its_argument() -> None:
    """One name as the argument: the function and that name (exp_tanh_x); an expression: the
    names it reads, through other locals (tanh(exp_x * y) reads x and y)."""
    section = share_calls({"x": "exp(tanh(x)) * tanh(x) + exp(tanh(x)) + tanh(exp(x) * y)",
                           "y": "tanh(exp(x) * y) * exp(x)"}, [])
    assert list(section) == ["tanh_x", "exp_tanh_x", "exp_x", "tanh_x_y", "x", "y"]


# -- large and deep forwards: derived within the language's limits, in polynomial time ------------

def _chain(template: str, depth: int, inner: str = "x") -> str:
    """``template`` (one ``{}``) nested ``depth`` deep around ``inner``."""
    text = inner
    for _ in range(depth):
        text = template.format(text)
    return text


@pytest.mark.parametrize(("forward", "domain"), [
    ("*".join(["x"] * 40), (0.95, 1.05)),   # the product rule nests each factor's derivative
    ("*".join(["x"] * 100), (0.98, 1.02)),  # as deep as the language allows a forward
    ("**".join(["x"] * 50), (0.9, 1.1)),
    (_chain("sin({})", 99), (-2, 2)),
    (_chain("sigmoid({})", 37), (-2, 2)),   # numpy writes each sigmoid 4 parentheses deep
    (_chain("x / ({})", 49), (0.5, 2)),
], ids=["product-40", "product-100", "power-50", "sin-99", "sigmoid-37", "quotient-49"])
def test_a_deep_forward_has_a_backward_the_language_accepts(forward: str,
                                                            domain: tuple[float, float]) -> None:
    """A forward as deep as the language allows nests deeper still in its derivative: the
    derived backward computes the deepest parts in locals of their own (grad_x_part1, ...), and
    is checked and emitted as a written one is (formerly 'expression too deep', a traceback)."""
    _check_against_differences({"out": forward}, domain)


def _intermediates(count: int) -> dict[str, str]:
    """``count`` intermediates, each the last times x, then ``out`` the last of them."""
    return {"t0": "x", **{f"t{i}": f"t{i - 1} * x" for i in range(1, count)},
            "out": f"t{count - 1}"}


def test_a_chain_of_intermediates_too_deep_to_derive_is_one_error() -> None:
    """Each intermediate reading the last nests the derivative one level deeper: 500 of them
    stopped the derivation on a RecursionError (3000 lines of traceback)."""
    with pytest.raises(SpecError, match="backward: auto: the forward nests too deep to derive"):
        _spec(_intermediates(500), ["out"])
    # 300 derive, but their backward is too deep to differentiate again: no double backward,
    # where a short chain has one
    assert _spec(_intermediates(3), ["out"]).double_backward is not None
    spec = _spec(_intermediates(300), ["out"])
    assert spec.backward is not None and spec.double_backward is None


@pytest.mark.parametrize("forward", [
    _chain("min({}, y)", 14),
    _chain("max(min({}, y), x * y)", 10),
    _chain("max({}, y) * x", 14),
], ids=["min-14", "max-min-10", "max-product-14"])
def test_nested_min_and_max_derive_in_polynomial_size(forward: str) -> None:
    """Each min or max wrote its argument's derivative into both branches of its selection, so
    n nested ones wrote it 2 ** n times (depth 14 ran for minutes): a large one is written once,
    where(a <= b, da * where(a < b, 1, 0.5), 0)."""
    spec = _spec({"out": forward}, ["out"])
    assert sum(len(text) for text in spec.backward_source.values()) < 20_000
    _check_against_differences({"out": forward}, (-2, 2))


@pytest.mark.parametrize(("x", "y", "want_x", "want_y"), [
    (1.0, 2.0, 9.0, 0.0),        # x ** 9 wins: all of the gradient
    (1.0, 1.0, 4.5, 0.5),        # a tie: half each
    (1.0, 0.5, 0.0, 1.0),        # y wins
    (math.nan, 1.0, 0.0, 0.0),   # NaN: none, as Paddle's MinGradDx
])
def test_a_large_derivative_written_once_keeps_the_kinks(x: float, y: float, want_x: float,
                                                         want_y: float) -> None:
    forward = {"out": "min(" + " * ".join(["x"] * 9) + ", y)"}
    spec = _spec(forward, ["out"])
    assert "<= y" in spec.backward_source["x"]  # the derivative is written once
    env = {"x": np.array([x]), "y": np.array([y]), "grad_out": np.array([1.0])}
    got = _run(spec.backward or {}, env, ("x", "y"))
    assert (got["grad_x"][0], got["grad_y"][0]) == (want_x, want_y)


def test_a_forward_too_large_to_differentiate_is_one_error_on_the_backward_line() -> None:
    """99 nested max: gradients of tens of thousands of operations, refused at once with the
    backward's line, not derived for minutes."""
    with pytest.raises(SpecError) as info:
        _spec({"out": _chain("max({}, y)", 99)}, ["out"])
    assert info.value.line == 7
    assert "backward: the forward is too large to differentiate" in str(info.value)
