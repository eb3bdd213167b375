"""Find the op names that the generated C++ cannot use, by compiling against the real headers.

An op's name becomes a namespace at global scope (``namespace sincos { ... }``) and the header
``csrc/<name>.h``, on an include path searched before the system's. So the name must not be

* declared at global scope by a header the generated code includes (``sincos`` and ``y0`` by
  <cmath>, ``select`` and ``index`` through paddle/extension.h, ``normcdf`` by CUDA's math API):
  g++ says ``'namespace sincos { }' redeclared as different kind of entity``;
* the stem of a header that those headers include by a bare name (``csrc/features.h`` would be
  read instead of glibc's <features.h>).

Each group of headers is probed with one compile: every lower-case word of the preprocessed
headers becomes ``namespace WORD {}`` on its own line, and the lines with an error are the
clashes; headers are found shadowed by putting a ``STEM.h`` that reports itself (then includes
the real one) in a folder searched first. The result is written to ``opgen/c_names.txt``, which
``opgen.names`` reads; sections not probed on this machine (CUDA, without ``--cuda``) are kept.

    python scripts/c_names.py            # <cmath> and paddle/extension.h, with g++
    python scripts/c_names.py --cuda     # also CUDA's headers, with nvcc
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "opgen" / "c_names.txt"
CPP = ["g++", "-std=c++17", "-x", "c++"]
CUDA = ["nvcc", "-std=c++17", "-x", "cu"]
WORD = re.compile(r"\b[a-z][a-z0-9_]*\b")
#: The header groups, in the order their sections are written: a later section lists only the
#: names that an earlier one has not.
GROUPS = {
    "<cmath>": ("#include <cmath>\n", CPP),
    "paddle/extension.h": ('#include "paddle/extension.h"\n', CPP),
    "CUDA": ("#include <cuda_runtime.h>\n#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n", CUDA),
}
KINDS = ("namespace", "header")


def paddle_flags() -> list[str]:
    """Include flags for paddle/extension.h: Paddle's include folders and Python's."""
    import paddle

    include = Path(paddle.__file__).parent / "include"
    return [f"-I{include}", f"-I{include / 'third_party'}",
            f"-I{sysconfig.get_paths()['include']}"]


def _compile(command: list[str], source: str, flags: list[str], *, preprocess: bool
             ) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / ("probe.cu" if "nvcc" in command[0] else "probe.cc")
        path.write_text(source)
        mode = ["-E"] if preprocess else (["-c", "-o", str(Path(tmp) / "probe.o")]
                                         if "nvcc" in command[0] else ["-fsyntax-only"])
        return subprocess.run([*command, *mode, *flags, str(path)], capture_output=True,
                              text=True, check=False, cwd=tmp)


def namespace_clashes(includes: str, command: list[str], flags: list[str],
                      keywords: frozenset[str]) -> list[str]:
    """The lower-case words of the headers that cannot name a namespace at global scope."""
    text = _compile(command, includes, flags, preprocess=True).stdout
    words = sorted(set(WORD.findall(text)) - keywords)
    first = includes.count("\n") + 1  # the line of the first namespace
    source = includes + "".join(f"namespace {w} {{}}\n" for w in words)
    errors = _compile(command, source, [*flags, "-fmax-errors=0"] if "g++" in command[0]
                      else flags, preprocess=False).stderr
    lines = {int(a or b) for a, b in re.findall(r"probe\.c[cu](?::(\d+):\d+|\((\d+)\)): error",
                                                errors)}
    return sorted(words[n - first] for n in lines if 0 <= n - first < len(words))


def shadowed_headers(includes: str, command: list[str], flags: list[str]) -> list[str]:
    """Stems of the headers that a same-named header in an -I folder would replace."""
    text = _compile(command, includes, [*flags, "-M"], preprocess=False).stdout
    files = [f for f in text.replace("\\\n", " ").split()[1:] if Path(f).is_file()]
    stems: set[str] = set()
    for f in files:
        stems.update(re.findall(r'^\s*#\s*include(?:_next)?\s*[<"]([a-z][a-z0-9_]*)\.h[>"]',
                                Path(f).read_text(errors="replace"), re.M))
    with tempfile.TemporaryDirectory() as shadow:
        for stem in stems:
            Path(shadow, f"{stem}.h").write_text(
                f'#pragma message("opgen-shadowed {stem}")\n#include_next <{stem}.h>\n')
        run = _compile(command, includes, [f"-I{shadow}", *flags], preprocess=True)
    return sorted(set(re.findall(r"opgen-shadowed (\w+)", run.stdout + run.stderr)))


def cpp_keywords() -> frozenset[str]:
    """C++'s keywords, as opgen/names.py lists them (read without importing opgen, whose
    dependencies a machine with CUDA may lack)."""
    tree = ast.parse((ROOT / "opgen" / "names.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == \
                "_CPP_KEYWORDS_TEXT":
            return frozenset(ast.literal_eval(node.value).split())
    raise SystemExit("opgen/names.py has no _CPP_KEYWORDS_TEXT")


def read(path: Path = DATA) -> dict[tuple[str, str], list[str]]:
    """The sections of the data file: (kind, header group) -> names."""
    sections: dict[tuple[str, str], list[str]] = {}
    current: list[str] | None = None
    for line in path.read_text().splitlines() if path.is_file() else []:
        if line.startswith("["):
            kind, group = line.strip("[]").split(" ", 1)
            current = sections.setdefault((kind, group), [])
        elif current is not None and line and not line.startswith("#"):
            current.extend(line.split())
    return sections


def write(sections: dict[tuple[str, str], list[str]], path: Path = DATA) -> None:
    """Write the sections, each name once (in the first section that has it)."""
    lines = ["# Op names the generated C++ cannot use: written by scripts/c_names.py (see there",
             "# how), read by opgen/names.py. Do not edit; run the script again instead."]
    seen: dict[str, set[str]] = {kind: set() for kind in KINDS}
    for kind in KINDS:
        for group in GROUPS:
            names = [n for n in sections.get((kind, group), []) if n not in seen[kind]]
            if not names:
                continue
            seen[kind].update(names)
            lines += ["", f"[{kind} {group}]", *textwrap.wrap(" ".join(sorted(names)), 100)]
    path.write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cuda", action="store_true", help="also probe CUDA's headers (nvcc)")
    parser.add_argument("--only", choices=list(GROUPS), action="append",
                        help="probe only these header groups (repeatable)")
    parser.add_argument("--output", type=Path, default=DATA, help=f"default: {DATA}")
    args = parser.parse_args(argv)
    sections = read()
    groups = args.only or [g for g in GROUPS if g != "CUDA" or args.cuda]
    for group in groups:
        includes, command = GROUPS[group]
        flags = paddle_flags() if group == "paddle/extension.h" else []
        sections[("namespace", group)] = namespace_clashes(includes, command, flags,
                                                           cpp_keywords())
        sections[("header", group)] = shadowed_headers(includes, command, flags)
        print(f"{group}: {len(sections[('namespace', group)])} names, "
              f"{len(sections[('header', group)])} headers", file=sys.stderr)
    write(sections, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
