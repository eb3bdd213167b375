"""Round 14's launcher timings side by side: every `--time-only` output under the folders given
(run-a, run-a2, run-c), grouped by build (the word in the file's name) in file order, one line per
(op, shape, dtype) with each build's ratios to the copy of its own run.
    python3 docs/bench/h200-2026-12-03-round14/summarize.py DIR... [--builds head,nokeep,keep]
"""

import re
import sys
from collections import defaultdict
from pathlib import Path

LINE = re.compile(r"(\S+)\s+(\d+x\d+)\s+(\S+)\s+[\d.]+ ms\s+\d+ GB/s\s+copy\s+\d+\s+ratio ([\d.]+)")


def main(args: list[str]) -> None:
    builds: list[str] = []
    if "--builds" in args:
        i = args.index("--builds")
        builds = args[i + 1].split(",")
        args = args[:i] + args[i + 2:]
    ratios: dict[tuple[str, str, str], dict[str, list[float]]] = defaultdict(
        lambda: defaultdict(list))
    for folder in args:
        for path in sorted(Path(folder).glob("t*-*.txt")):
            if path.name.startswith("times"):
                continue
            words = path.stem.split("-")  # time-3-keep, t-keep-5436
            build = words[-2] if words[-1].isdigit() else words[-1]
            if not builds or build in builds:
                for line in path.read_text().splitlines():
                    m = LINE.match(line)
                    if m:
                        ratios[m.group(1, 2, 3)][build].append(float(m.group(4)))
    order = builds or sorted({b for v in ratios.values() for b in v})
    print(f"{'op':16s} {'shape':11s} {'dtype':9s} " + " ".join(f"{b:>24s}" for b in order))
    for (op, shape, dtype), by_build in ratios.items():
        cells = [" ".join(f"{r:.3f}" for r in by_build.get(b, [])) for b in order]
        print(f"{op:16s} {shape:11s} {dtype:9s} " + " ".join(f"{c:>24s}" for c in cells))


if __name__ == "__main__":
    main(sys.argv[1:])
