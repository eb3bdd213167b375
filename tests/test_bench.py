"""``opgen bench`` on the CPU: comparisons Paddle cannot run are skipped with a note, and the rows
already measured are reported and written when a later step fails.

Tiny sizes and one repeat: these check the command's behaviour, not any figure.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_opgen

from opgen import bench, cli

pytestmark = pytest.mark.build

#: tanh: Paddle 3.3.1 has no CPU float16 or bfloat16 kernel for it.
SPEC = """\
name: t_tanh
op_name: custom_t_tanh
kind: elementwise
inputs: [x]
outputs: [out]
dtypes: [float32, float16, bfloat16]
forward:
  out: tanh(x)
baseline: tanh(x)
"""


@pytest.fixture(scope="module")
def tanh_op(tmp_path_factory) -> Path:
    op = tmp_path_factory.mktemp("bench") / "t_tanh"
    op.mkdir()
    (op / "t_tanh.yaml").write_text(SPEC)
    result = run_opgen("generate", str(op / "t_tanh.yaml"))
    assert result.returncode == 0, result.stderr
    result = run_opgen("build", str(op), "--cpu-only")
    assert result.returncode == 0, result.stderr
    return op


def test_a_baseline_paddle_cannot_run_is_skipped_with_one_line(tanh_op, tmp_path):
    out = tmp_path / "bench.json"
    result = run_opgen("bench", str(tanh_op), "--sizes", "1024", "--repeats", "1",
                       "--json", str(out))
    assert result.returncode == 0, result.stderr[-3000:]
    notes = [line for line in result.stdout.splitlines() if line.startswith("note: ")]
    assert [n.split(":")[1] for n in notes] == [" baseline skipped for float16",
                                                " baseline skipped for bfloat16"], notes
    assert "`tanh` is not registered" in notes[0] and "Paddle cannot run it on the CPU" \
        in notes[0]
    data = json.loads(out.read_text())
    kernels = {(r["dtype"], r["kernel"]) for r in data["rows"]}
    assert kernels == {("float32", "op"), ("float32", "copy"), ("float32", "baseline"),
                       ("float16", "op"), ("float16", "copy"),
                       ("bfloat16", "op"), ("bfloat16", "copy")}
    assert [(s["kernel"], s["dtype"]) for s in data["skipped"]] == \
        [("baseline", "float16"), ("baseline", "bfloat16")]
    assert data["error"] is None


def test_rows_measured_before_a_failure_are_written(tanh_op, tmp_path, monkeypatch, capsys):
    real = bench.bench_paddle

    def fails_at_bfloat16(*args, **kwargs):
        if "bfloat16" in args:
            raise RuntimeError("(ResourceExhausted) Out of memory\n  [Hint: ...]")
        return real(*args, **kwargs)

    monkeypatch.setattr(bench, "bench_paddle", fails_at_bfloat16)
    out = tmp_path / "bench.json"
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["bench", str(tanh_op), "--sizes", "1024", "--repeats", "1", "--compare",
                  "copy", "--json", str(out)])
    assert exit_info.value.code == 1
    captured = capsys.readouterr()
    assert captured.err.splitlines()[-1] == \
        "error: bfloat16 n=1024: (ResourceExhausted) Out of memory"
    assert "Traceback" not in captured.err and "(incomplete)" in captured.out
    data = json.loads(out.read_text())
    assert {(r["dtype"], r["kernel"]) for r in data["rows"]} == \
        {("float32", "op"), ("float32", "copy"), ("float16", "op"), ("float16", "copy")}
    assert data["error"] == "bfloat16 n=1024: (ResourceExhausted) Out of memory"


def test_outputs_are_checked_before_measuring(tanh_op, tmp_path):
    result = run_opgen("bench", str(tanh_op), "--sizes", "1024", "--repeats", "1", "--compare",
                       "copy", "--json", str(tmp_path / "no" / "b.json"))
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("error: --json ") and "no folder" in result.stderr
    assert result.stdout == ""  # refused before measuring
