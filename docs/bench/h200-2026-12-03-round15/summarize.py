"""Round 15's tables from run A's raw output (python3 summarize.py > summary.txt):
layer_norm's backward, generated (two means in one round) against hand-written (one at a time),
every dtype and shape; the generated examples' cells at issue 13's targets; and the launcher
bench of main before the round (head) against this round's (new), best of two runs each."""

import re
import statistics
from pathlib import Path

A = Path(__file__).parent / "a"
GEN = re.compile(r"(\w+)\s+(forward|backward)\s+(\w+)\s+(\d+x\d+)\s+gen\s+[\d.]+ ms\s+\d+ GB/s "
                 r"([\d.]+)(?: \| hand\s+[\d.]+ ms ([\d.]+))?")
BENCH = re.compile(r"(\w+)\s+(\d+x\d+)\s+(\w+)\s+[\d.]+ ms\s+\d+ GB/s\s+copy\s+\d+\s+ratio ([\d.]+)")

rows = [m.groups() for line in open(A / "examples.txt") if (m := GEN.match(line))]
print("layer_norm backward, x copy: generated (one round) / hand-written (two rounds)")
for op, direction, dtype, shape, gen, hand in rows:
    if op == "layer_norm" and direction == "backward":
        print(f"  {dtype:9} {shape:11} {gen} / {hand}  ({float(gen) / float(hand):.2f} x)")
print("generated examples at issue 13's targets (softmax, layer_norm, rms_norm):")
for direction, target in (("forward", 0.85), ("backward", 0.75)):
    cells = [r for r in rows if r[0] in ("softmax", "layer_norm", "rms_norm") and r[1] == direction]
    print(f"  {direction} >= {target}: {sum(float(r[4]) >= target for r in cells)} of {len(cells)}")
    for r in cells:
        if float(r[4]) < target:
            print(f"    miss {r[0]} {r[2]} {r[3]} {r[4]}")


def bench(name: str) -> dict:
    return {m.groups()[:3]: float(m.group(4))
            for line in open(A / name) if (m := BENCH.match(line))}


h1, n1, n2, h2 = (bench(f) for f in ("time-1-rowwise_bench_head.txt", "time-2-rowwise_bench.txt",
                                     "time-3-rowwise_bench.txt", "time-4-rowwise_bench_head.txt"))
diffs = sorted((max(n1[k], n2[k]) - max(h1[k], h2[k]), k) for k in h1)
print(f"launcher bench, new - head (best of two runs each), {len(diffs)} cells: median "
      f"{statistics.median(d for d, _ in diffs):+.3f}, from {diffs[0][0]:+.3f} ({' '.join(diffs[0][1])})"
      f" to {diffs[-1][0]:+.3f} ({' '.join(diffs[-1][1])})")
spread = max(abs(h1[k] - h2[k]) for k in h1)
print(f"  head's two runs differ by up to {spread:.3f}")
