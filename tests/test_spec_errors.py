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
        f"{spec}:1: the spec file is larger than 256 KiB, the limit for a spec"


@needs_cli
def test_the_cli_refuses_an_oversized_spec_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from opgen.cli import main

    spec, out = _oversized(tmp_path), tmp_path / "out"
    with pytest.raises(SystemExit) as info:
        main(["generate", str(spec), "--out", str(out)])
    assert info.value.code == 2
    assert capsys.readouterr().err == \
        f"error: {spec}:1: the spec file is larger than 256 KiB, the limit for a spec\n"
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
