"""The cells that moved between variants of scripts/gpu/rowwise_examples.sh (issue 13).

Reads the logs the runner writes (`rowwise-examples.txt`, or the tee of its output), each with
`== vN` sections of `op direction dtype shape gen ... ms ... GB/s RATIO` lines, and prints, for
every (op, direction, dtype, shape), the ratio x copy of each variant where two of them differ by
more than --threshold, or where the shape is one of --always. With several logs, variant vN of
log k is named by its letter (a, b, ...) and N: a1, b1, b2.

    python3 scripts/gpu/rowwise_examples_diff.py /tmp/r/rx/log.txt
    python3 scripts/gpu/rowwise_examples_diff.py a/log.txt b/log.txt --always 1024x32768
"""

import argparse
import re
import string

_ROW = re.compile(r"(\w+)\s+(forward|backward)\s+(\w+)\s+(\d+x\d+)\s+gen\s+([\d.]+) ms\s+"
                  r"(\d+) GB/s ([\d.]+)")


def ratios(paths: list[str]) -> tuple[list[str], dict[tuple[str, ...], dict[str, float]]]:
    """The variants in order of appearance, and each cell's ratio x copy per variant."""
    names: list[str] = []
    rows: dict[tuple[str, ...], dict[str, float]] = {}
    if len(paths) > len(string.ascii_lowercase):
        raise SystemExit(f"at most {len(string.ascii_lowercase)} logs")
    for letter, path in zip(string.ascii_lowercase[:len(paths)], paths, strict=True):
        variant = None
        with open(path) as log:
            for line in log:
                if line.startswith("== v"):
                    number = line.split()[1]
                    variant = number if len(paths) == 1 else letter + number[1:]
                    names.append(variant)
                elif (m := _ROW.match(line)) and variant is not None:
                    rows.setdefault(m.group(1, 2, 3, 4), {})[variant] = float(m[7])
    return names, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("logs", nargs="+")
    parser.add_argument("--threshold", type=float, default=0.012)
    parser.add_argument("--always", default="",
                        help="shapes printed whatever moved, e.g. 1024x32768")
    args = parser.parse_args()
    names, rows = ratios(args.logs)
    always = set(filter(None, args.always.split(",")))
    print("op direction dtype shape", *names)
    for cell, by_variant in rows.items():
        values = [by_variant.get(n) for n in names]
        seen = [v for v in values if v is not None]
        if cell[3] in always or (seen and max(seen) - min(seen) > args.threshold):
            print(*cell, *values)


if __name__ == "__main__":
    main()
