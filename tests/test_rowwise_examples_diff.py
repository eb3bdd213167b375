"""scripts/gpu/rowwise_examples_diff.py: the cells that moved between variants of the GPU runner's
log, read from the runner's own line format (a run on the device is not needed to check it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "gpu" / "rowwise_examples_diff.py"

_LOG = """built in 0 s
== v{a} default
spill warnings: 3
copy          -        float32   4096x4096    2815 GB/s
softmax       forward  float32   4096x4096    gen   0.0478 ms  2809 GB/s {f} | hand 0.05 ms 1.0
                                                schedule: block/row   vec 4 x 4 chunks
softmax       backward float32   1024x32768   gen   0.1790 ms  2250 GB/s 0.768 | hand 0.16 ms 0.842
== v{b} -DKNOB=0
softmax       forward  float32   4096x4096    gen   0.0478 ms  2809 GB/s 0.998 | hand 0.05 ms 1.0
softmax       backward float32   1024x32768   gen   0.1630 ms  2471 GB/s {g} | hand 0.16 ms 0.818
"""


def _diff(tmp_path: Path, logs: list[str], *args: str) -> list[str]:
    paths = []
    for k, text in enumerate(logs):
        path = tmp_path / f"log{k}.txt"
        path.write_text(text)
        paths.append(str(path))
    done = subprocess.run([sys.executable, str(SCRIPT), *paths, *args], capture_output=True,
                          text=True, check=True)
    return done.stdout.splitlines()


def test_only_cells_that_moved_past_the_threshold_are_listed(tmp_path: Path) -> None:
    log = _LOG.format(a=1, b=2, f="1.010", g="0.844")
    assert _diff(tmp_path, [log]) == [
        "op direction dtype shape v1 v2",
        "softmax forward float32 4096x4096 1.01 0.998",
        "softmax backward float32 1024x32768 0.768 0.844",
    ]
    assert _diff(tmp_path, [log], "--threshold", "0.05") == [
        "op direction dtype shape v1 v2",
        "softmax backward float32 1024x32768 0.768 0.844",
    ]


def test_several_logs_name_their_variants_by_letter_and_always_shapes_print(
        tmp_path: Path) -> None:
    same = _LOG.format(a=1, b=2, f="0.998", g="0.768")
    assert _diff(tmp_path, [same, same]) == ["op direction dtype shape a1 a2 b1 b2"]
    assert _diff(tmp_path, [same, same], "--always", "1024x32768") == [
        "op direction dtype shape a1 a2 b1 b2",
        "softmax backward float32 1024x32768 0.768 0.768 0.768 0.768",
    ]
