"""Malformed specs: each is answered with one exact ``error: <file>:<line>: ...`` line.

Every file under ``specs/malformed/`` is a small complete spec (the relu6 example) with one defect.
Its first line records the answer it must get::

    # expect: error: {file}:12: forward.out: unknown name 'y' in ...

where ``{file}`` stands for the spec's path as given on the command line. Line numbers count that
comment line. Each case is checked through :func:`opgen.spec.load` and, when the CLI exists,
through ``opgen generate SPEC --out DIR``, which must exit with code 2, print that one line on
stderr and no traceback, and write nothing.
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from opgen.errors import SpecError
from opgen.spec import load

ROOT = Path(__file__).resolve().parent.parent
CORPUS = Path(__file__).resolve().parent / "specs" / "malformed"
CASES = sorted(CORPUS.glob("*.yaml"))
HAS_CLI = (ROOT / "opgen" / "cli.py").is_file()
PREFIX = "# expect: "


def expected_line(spec: Path) -> str:
    """The error line ``spec`` records for itself, for ``spec`` written as it is given here."""
    first = spec.read_text(encoding="utf-8").split("\n", 1)[0]
    assert first.startswith(PREFIX), f"{spec.name}: first line must be '{PREFIX}error: ...'"
    return first[len(PREFIX):].replace("{file}", str(spec))


def test_corpus_is_large_and_varied() -> None:
    assert len(CASES) >= 45
    categories = {case.name.split("_", 1)[0] for case in CASES}
    assert categories >= {"yaml", "schema", "ident", "expr", "attr", "dtype", "kind", "opname",
                          "domain"}


@pytest.mark.parametrize("spec", CASES, ids=lambda p: p.stem)
def test_load_reports_the_expected_line(spec: Path) -> None:
    with pytest.raises(SpecError) as info:
        load(spec)
    got = f"error: {info.value}"
    assert "\n" not in got
    assert got == expected_line(spec)
    assert info.value.line >= 1
    assert info.value.line <= max(1, len(spec.read_text(encoding="utf-8").splitlines()))


# -- through the command line -------------------------------------------------------------------
# In-process, every case goes through the CLI's own entry point. In a subprocess, which costs about
# 0.4 s of CPU per run (too slow for all of them in a quick suite), one case of each category does.

def _category(spec: Path) -> str:
    return spec.name.split("_", 1)[0]


SAMPLE = sorted({_category(spec): spec for spec in reversed(CASES)}.values())
Run = subprocess.CompletedProcess[str]

needs_cli = pytest.mark.skipif(not HAS_CLI, reason="opgen/cli.py is not written yet")


@needs_cli
@pytest.mark.parametrize("spec", CASES, ids=lambda p: p.stem)
def test_cli_main_prints_one_line_exits_2_and_writes_nothing(
        spec: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from opgen.cli import main

    out = tmp_path / "out"
    with pytest.raises(SystemExit) as info:
        main(["generate", str(spec), "--out", str(out)])
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [expected_line(spec)]
    assert info.value.code == 2
    assert captured.out == ""
    assert not out.exists(), "a failed generate left files behind"


def _generate(spec: Path, out: Path) -> Run:
    env = dict(os.environ, PYTHONPATH=str(ROOT), NO_COLOR="1", COLUMNS="80")
    return subprocess.run([sys.executable, "-m", "opgen", "generate", str(spec), "--out", str(out)],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=120,
                          check=False)


@pytest.fixture(scope="module")
def cli_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[Path, tuple[Path, Run]]:
    """``python -m opgen generate`` on the sample, run concurrently."""
    base = tmp_path_factory.mktemp("generate")
    outs = {spec: base / spec.stem / "out" for spec in SAMPLE}
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 1)) as pool:
        runs = list(pool.map(lambda spec: _generate(spec, outs[spec]), SAMPLE))
    return {spec: (outs[spec], run) for spec, run in zip(SAMPLE, runs, strict=True)}


@needs_cli
@pytest.mark.parametrize("spec", SAMPLE, ids=lambda p: p.stem)
def test_python_m_opgen_prints_one_line_exits_2_and_writes_nothing(
        spec: Path, cli_runs: dict[Path, tuple[Path, Run]]) -> None:
    out, run = cli_runs[spec]
    assert "Traceback" not in run.stderr
    assert run.stderr.splitlines() == [expected_line(spec)]
    assert run.returncode == 2
    assert run.stdout == ""
    assert not out.parent.exists(), "a failed generate left files behind"


def test_corpus_is_untouched() -> None:
    """Nothing was written next to the specs (a failed generate must not leave files behind)."""
    assert sorted(p.name for p in CORPUS.iterdir()) == sorted(p.name for p in CASES)


# -- a spec too large to read -------------------------------------------------------------------

def _oversized(tmp_path: Path) -> Path:
    """The relu6 example with a summary that makes it 10 MB."""
    text = (ROOT / "examples" / "relu6" / "relu6.yaml").read_text(encoding="utf-8")
    spec = tmp_path / "big.yaml"
    spec.write_text(text.replace("summary: ReLU6", "summary: ReLU6" + "x" * 10_000_000, 1))
    return spec


def test_a_spec_over_256_kib_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    spec = _oversized(tmp_path)
    with pytest.raises(SpecError) as info:
        load(spec)
    assert str(info.value) == \
        f"{spec}: the spec file is larger than 256 KiB, the limit for a spec"


@needs_cli
def test_the_cli_refuses_an_oversized_spec_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from opgen.cli import main

    spec, out = _oversized(tmp_path), tmp_path / "out"
    with pytest.raises(SystemExit) as info:
        main(["generate", str(spec), "--out", str(out)])
    assert info.value.code == 2
    assert capsys.readouterr().err == \
        f"error: {spec}: the spec file is larger than 256 KiB, the limit for a spec\n"
    assert not out.exists()


def test_a_byte_that_is_not_utf8_is_named_at_its_line_and_column(tmp_path: Path) -> None:
    text = (CORPUS.parent.parent.parent / "examples" / "relu6" / "relu6.yaml").read_bytes()
    lines = text.split(b"\n")
    lines[11] = lines[11][:4] + b"\xff" + lines[11][4:]  # line 12, column 5
    spec = tmp_path / "relu6.yaml"
    spec.write_bytes(b"\r\n".join(lines))  # Windows line ends count lines as "\n" does
    with pytest.raises(SpecError) as info:
        load(spec)
    assert str(info.value) == f"{spec}:12: not UTF-8 text: byte 0xff at column 5"
    lines[11] = "summary: é".encode() + b"\xff"  # a character of two bytes before it
    spec.write_bytes(b"\n".join(lines))
    with pytest.raises(SpecError) as info:
        load(spec)
    assert str(info.value) == f"{spec}:12: not UTF-8 text: byte 0xff at column 11"
    spec.write_bytes(b"\r\n".join(text.split(b"\n")))
    assert load(spec).model.name == "relu6"


# -- specs that crashed, or were accepted, or named the schema's internals ------------------------
# Each is a whole spec, written to a file, and the one line it must get ({file}: that file).

ROWWISE = "name: rl\nkind: rowwise\n{inputs}\n{outputs}\nforward:\n  out: x\n"
CUSTOM = ("name: c\nkind: custom\ninputs:\n  x: {{{input}}}\noutputs:\n"
          "  out: {{dtype: float32, shape: \"{shape}\"}}\n{extra}")
ROLES_IN = "element (per-element [*, C]), column (per-column [C]), row (per-row [*] or [*, 1])"


def custom(input: str = "dtype: float32, shape: [N, M]", shape: str = "[N]",
           extra: str = "") -> str:
    """A custom spec of input x and output out: ``input`` is x's mapping, ``shape`` out's."""
    return CUSTOM.format(input=input, shape=shape, extra=extra)


MALFORMED = [
    # a role that is a list or a mapping: TypeError: unhashable type
    pytest.param(ROWWISE.format(inputs="inputs: {x: [element]}", outputs="outputs: [out]"),
                 f"{{file}}:3: inputs.x: expected one role of {ROLES_IN}, got a list",
                 id="role-list"),
    pytest.param(ROWWISE.format(inputs="inputs: [x]", outputs="outputs: {out: {a: 1}}"),
                 "{file}:4: outputs.out: expected one role of element (per-element [*, C]), "
                 "row (per-row [*]), got a mapping", id="role-mapping"),
    pytest.param(ROWWISE.format(inputs="inputs: {x: }", outputs="outputs: [out]"),
                 f"{{file}}:3: inputs.x: no role given; expected one of {ROLES_IN}",
                 id="role-none"),
    pytest.param(ROWWISE.format(inputs="inputs: {x: [element]}", outputs="outputs: [out]")
                 .replace("rowwise", "elementwise"),
                 "{file}:3: inputs: roles (element, column, row) are for kind: rowwise; an "
                 "elementwise op lists its inputs: [a, b]", id="role-list-elementwise"),
    pytest.param(ROWWISE.format(inputs="inputs: [x]", outputs="outputs: {out: {a: 1}}")
                 .replace("rowwise", "elementwise"),
                 "{file}:4: outputs: roles (element, row) are for kind: rowwise; an "
                 "elementwise op lists its outputs: [a, b]", id="role-mapping-elementwise"),
    # a 0-D input: IndexError in the code generation
    pytest.param(custom(input="dtype: float32, shape: []", shape="[1]"),
                 "{file}:4: inputs.x.shape: [] (a 0-D tensor) cannot be declared; write 'any' "
                 "(a shape the wrapper does not check) or list the dims, such as [1]",
                 id="shape-0d"),
    # output shapes too long or too deep: RecursionError, MemoryError
    pytest.param(custom(shape="[" + "+".join(["N"] * 3000) + "]"),
                 "{file}:6: outputs.out.shape: 6001 characters, more than 1000: an output's "
                 "shape is a short list of dims", id="shape-3000-terms"),
    pytest.param(custom(shape="[" + "-" * 1000 + "N]"),
                 "{file}:6: outputs.out.shape: 1003 characters, more than 1000: an output's "
                 "shape is a short list of dims", id="shape-1000-minus"),
    pytest.param(custom(shape="-" * 100_000),
                 "{file}:6: outputs.out.shape: 100000 characters, more than 1000: an output's "
                 "shape is a short list of dims", id="shape-100000-minus"),
    pytest.param(custom(shape="[" + "+".join(["N"] * 150) + "]"),
                 "{file}:6: outputs.out.shape: shape too deep; nest at most 100 operations and "
                 "parentheses", id="shape-150-terms"),
    pytest.param(custom(shape="[" + "-(" * 120 + "N" + ")" * 120 + "]"),
                 "{file}:6: outputs.out.shape: shape too deep; nest at most 100 operations and "
                 "parentheses", id="shape-120-negations"),
    # accepted, for code that reads out of bounds or overflows
    pytest.param(custom(shape="[x.shape[99]]"),
                 "{file}:6: outputs.out.shape: x.shape[99] is out of range: x has 2 dims "
                 "[N, M] (indices -2 to 1)", id="index-past-rank"),
    pytest.param(custom(shape="[x.shape[-3]]"),
                 "{file}:6: outputs.out.shape: x.shape[-3] is out of range: x has 2 dims "
                 "[N, M] (indices -2 to 1)", id="index-before-rank"),
    pytest.param(custom(input="dtype: float32", shape="[x.shape[99999999999999999999999]]"),
                 "{file}:6: outputs.out.shape: x.shape[99999999999999999999999] may not exist: "
                 "x's shape is any, so an output's shape reads its first or last dim at most "
                 "(x.shape[0] or x.shape[-1]); declare the dims it reads, as [..., A, B]",
                 id="index-any-rank-far"),
    pytest.param(custom(shape="[99999999999999999999999]"),
                 "{file}:6: outputs.out.shape: 99999999999999999999999 does not fit in int64, "
                 "the type of a dim", id="dim-int64"),
    pytest.param(custom(shape="[N * (4611686018427387904 * 2)]"),
                 "{file}:6: outputs.out.shape: '4611686018427387904 * 2' is "
                 "9223372036854775808, which does not fit in int64, the type of a dim",
                 id="dim-product-int64"),
    pytest.param(custom(input="dtype: float32, shape: [99999999999999999999999]", shape="[1]"),
                 "{file}:4: inputs.x.shape: 99999999999999999999999 does not fit in int64, the "
                 "type of a dim", id="input-dim-int64"),
    pytest.param(custom(input="dtype: int64, shape: [N], range: [10, 0]"),
                 "{file}:4: inputs.x.range: [10, 0] is empty; expected [low, high] with "
                 "low < high (high excluded)", id="range-empty"),
    pytest.param(custom(input="dtype: int64, shape: [N], range: [N, N]"),
                 "{file}:4: inputs.x.range: [N, N] is empty; expected [low, high] with "
                 "low < high (high excluded)", id="range-same-dim"),
    pytest.param(custom(input="dtype: int64, shape: [N], range: [0, 99999999999999999999999]"),
                 "{file}:4: inputs.x.range: 99999999999999999999999 does not fit in int64",
                 id="range-int64"),
    # the schema's words ("inputs.x.dtype.str: expected a string") for the spec's
    pytest.param(custom().replace("inputs:\n  x: {dtype: float32, shape: [N, M]}",
                                  "inputs: [x]"),
                 "{file}:3: inputs: expected a mapping of each input's name to {dtype: ..., "
                 "shape: ...}, e.g. {x: {dtype: float32, shape: [N]}}, got a list",
                 id="inputs-list"),
    pytest.param(custom(input="dtype: 5"),
                 "{file}:4: inputs.x.dtype: expected a dtype (bool, int8, uint8, int16, int32, "
                 "int64, float16, bfloat16, float32, float64), a list of them, 'float types', "
                 "'int types' or 'same as <input>', got 5", id="dtype-number"),
    pytest.param(custom(input="dtype: [float32, 5]"),
                 "{file}:4: inputs.x.dtype[1]: expected a dtype such as float32, got 5",
                 id="dtype-list-item"),
    pytest.param(custom(input="dtype: float32, shape: [N, null]"),
                 "{file}:4: inputs.x.shape[1]: expected a dim: a size, a name such as D, or "
                 "'...', got nothing", id="shape-null-dim"),
    pytest.param(custom(input="dtype: float32, shape: 5"),
                 "{file}:4: inputs.x.shape: expected a list of dims such as [V, D] or [..., D], "
                 "or 'any', got 5", id="shape-number"),
    pytest.param(custom(extra="attrs:\n  v: {type: 'str[]', default: []}\n"),
                 "{file}:8: attrs.v.type: unknown attr type 'str[]'; expected one of 'bool', "
                 "'int', 'int64', 'float', 'str', 'int[]', 'int64[]', 'float[]'",
                 id="attr-type"),
    pytest.param(custom(input="dtype: int64, range: [0, null]"),
                 "{file}:4: inputs.x.range[1]: expected a number or a dim name, got nothing",
                 id="range-null"),
    pytest.param(custom(extra="backward: auto\n"),
                 "{file}:7: backward: expected a list of the inputs that get a gradient, "
                 "e.g. [x], got 'auto'", id="backward-auto"),
    pytest.param(custom(extra="sizes: {N: eight}\n"),
                 "{file}:7: sizes.N: expected a size (an integer), got 'eight'", id="size-word"),
]


@pytest.mark.parametrize(("text", "want"), MALFORMED)
def test_a_malformed_spec_gets_one_clear_line(text: str, want: str, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "op.yaml"
    spec.write_text(text, encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load(spec, check_builtins=False)
    assert str(info.value) == want.replace("{file}", str(spec))
    if HAS_CLI:
        from opgen.cli import main

        with pytest.raises(SystemExit) as exited:
            main(["generate", str(spec), "--out", str(tmp_path / "out")])
        assert exited.value.code == 2
        assert capsys.readouterr().err.splitlines() == [f"error: {info.value}"]


@pytest.mark.parametrize("shape", ["[x.shape[-2], x.shape[1]]", "[N * 4611686018427387903]"])
def test_an_index_within_the_rank_and_a_dim_that_fits_int64_are_accepted(
        shape: str, tmp_path: Path) -> None:
    spec = tmp_path / "op.yaml"
    spec.write_text(custom(shape=shape), encoding="utf-8")
    assert load(spec, check_builtins=False).kind_data.out_shapes["out"]
