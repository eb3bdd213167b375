"""Round 16, run A: the generated functors' ratios to the copy, per build (best of its two runs),
for rms_norm's and add_rms_norm's backwards and every cell that moved; and issue 13's targets
(forward >= 0.85, backward >= 0.75 for softmax, layer_norm, rms_norm) on the default build.
Run from this folder after extracting a.tgz: python3 summarize.py"""
import re
from collections import defaultdict
from pathlib import Path

LINE = re.compile(r"^(\w+)\s+(forward|backward)\s+(\w+)\s+(\d+x\d+)\s+gen\s+[\d.]+ ms\s+\d+ GB/s ([\d.]+)")
best: dict[str, dict[tuple, float]] = defaultdict(dict)
for path in sorted(Path("a").glob("time-*-ex_*.txt")):
    build = path.stem.split("-", 2)[2]
    for line in path.read_text().splitlines():
        m = LINE.match(line)
        if m:
            key = m.groups()[:4]
            best[build][key] = max(best[build].get(key, 0.0), float(m.group(5)))

default, old, pairs = best["ex_default"], best["ex_oldgen"], best["ex_pairs"]
print("backwards that make two means in one round now: default (one round) / oldgen (two)")
for key in default:
    if key[0] in ("rms_norm", "add_rms_norm") and key[1] == "backward":
        print(f"  {key[0]:13s} {key[2]:9s} {key[3]:11s} {default[key]:.3f} / {old[key]:.3f}"
              f"  ({default[key] / old[key]:.2f} x)")
print("ex_pairs (two row groups loaded at once) against default, cells with column sums:")
for key in default:
    if key[1] == "backward" and key[0] in ("rms_norm", "layer_norm", "add_rms_norm"):
        print(f"  {key[0]:13s} {key[2]:9s} {key[3]:11s} {pairs[key]:.3f} vs {default[key]:.3f}"
              f"  ({pairs[key] - default[key]:+.3f})")
for direction, target in (("forward", 0.85), ("backward", 0.75)):
    cells = [(k, v) for k, v in default.items()
             if k[1] == direction and k[0] in ("softmax", "layer_norm", "rms_norm")]
    met = sum(v >= target for _, v in cells)
    print(f"{direction} >= {target}: {met} of {len(cells)}")
    for k, v in cells:
        if v < target:
            print(f"  miss {k[0]} {k[2]} {k[3]} {v:.3f}")
