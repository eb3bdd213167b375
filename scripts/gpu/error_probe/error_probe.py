"""Which ways of raising an error from a custom op kill the process on this machine?

Builds probe.cc (five ops, each raising in one way) with this machine's g++ against the installed
Paddle, optionally once more with extra link flags, then calls each op on a CPU tensor in its own
process and prints how it ended. Made for the H200 machine, where an op's PD_THROW ended the
process with SIGSEGV (docs/bench/). Usage: python3 scripts/gpu/error_probe/error_probe.py
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
OPS = ["probe_ostream_string", "probe_imbue_classic", "probe_global_classic", "probe_twin_throw",
       "probe_ostream_long", "probe_std_throw", "probe_ostream_throw", "probe_pd_check",
       "probe_pd_throw"]
VARIANTS = {"default": []}

CALL = """
import sys, numpy as np, paddle
from paddle.utils.cpp_extension import load
lib = load(name=sys.argv[1], sources=[sys.argv[2]], build_directory=sys.argv[3],
           extra_cxx_cflags=["-std=c++17"], extra_ldflags=sys.argv[5:], verbose=False)
x = paddle.to_tensor(np.ones(4, np.float32))
try:
    getattr(lib, sys.argv[4])(x)
    print("returned")
except Exception as e:
    print(f"raised {type(e).__name__}: {str(e).strip().splitlines()[-1][:120]}")
"""


def main() -> None:
    print(subprocess.run(["g++", "--version"], capture_output=True, text=True).stdout.splitlines()[0])
    for variant, ldflags in VARIANTS.items():
        build = Path(tempfile.mkdtemp(prefix=f"probe-{variant}-"))
        name = f"probe_{variant.replace('-', '_').replace('+', 'p')}"
        # Build once (first call), then each op in a fresh process.
        for op in OPS:
            proc = subprocess.run([sys.executable, "-c", CALL, name, str(HERE / "probe.cc"),
                                   str(build), op, *ldflags], capture_output=True, text=True,
                                  env={**os.environ, "GLOG_minloglevel": "3"})
            if proc.returncode < 0:
                outcome = f"killed by {signal.Signals(-proc.returncode).name}"
            elif proc.returncode:
                outcome = f"exit {proc.returncode}: {proc.stderr.strip().splitlines()[-1:]}"
            else:
                outcome = proc.stdout.strip().splitlines()[-1]
            print(f"{variant:18} {op:22} {outcome}")
        bindings = subprocess.run([sys.executable, "-c", CALL, name, str(HERE / "probe.cc"),
                                   str(build), "probe_ostream_long"], capture_output=True,
                                  text=True, env={**os.environ, "GLOG_minloglevel": "3",
                                                  "LD_DEBUG": "bindings"}).stderr
        for line in bindings.splitlines():
            if "probe" in line.split("binding file")[-1][:80] and any(
                    k in line for k in ("_M_insert", "ostringstream", "num_put", "locale")):
                print("  ", " ".join(line.split()[1:]))
        so = next(build.rglob("*.so"), None)
        if so is not None:
            ldd = subprocess.run(["ldd", str(so)], capture_output=True, text=True).stdout
            print("  ldd:", " ".join(line.split()[0] for line in ldd.splitlines()
                                     if "stdc++" in line or "gcc_s" in line or "paddle" in line))


if __name__ == "__main__":
    main()
