"""``opgen doctor`` against fake machines: fake tools on PATH, a fake CUDA toolkit, a fake Paddle.

Each test builds the machine it needs with :class:`FakeMachine`; only
``test_real_environment`` looks at the real one.
"""

from __future__ import annotations

import json
import stat
import struct
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from opgen import doctor, probe, toolchain
from opgen.doctor import Check, KernelImage
from opgen.probe import GpuRun, PaddleInfo

# The real cached probes, held before any test replaces them on the module.
_CACHED_PROBES = (probe.ask_paddle, toolchain.cuda_home, toolchain.nvcc_version)


def _clear_caches() -> None:
    for cached in _CACHED_PROBES:
        cached.cache_clear()


class FakeMachine:
    """A machine made of shell scripts in a temp dir, which becomes the whole of PATH."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.root = root
        self.bin = root / "bin"
        self.bin.mkdir()
        self.mp = monkeypatch
        monkeypatch.setenv("PATH", str(self.bin))
        for var in ("CUDA_HOME", "CUDA_PATH", "CXX"):
            monkeypatch.delenv(var, raising=False)
        # No toolkit unless one is installed: cuda_home() would otherwise find /usr/local/cuda.
        self._real_cuda_home = toolchain.cuda_home
        monkeypatch.setattr(toolchain, "cuda_home", lambda: None)
        monkeypatch.setattr(doctor, "paddle_dir", lambda: None)
        self.no_paddle()
        _clear_caches()

    def tool(self, name: str, body: str) -> None:
        """Install an executable shell script ``name`` on PATH."""
        path = self.bin / name
        path.write_text("#!/bin/sh\n" + body)
        path.chmod(path.stat().st_mode | stat.S_IEXEC)

    def no_paddle(self) -> None:
        self.mp.setattr(probe, "paddle_version", lambda: None)
        self.mp.setattr(probe, "paddle_info", lambda: None)
        self.mp.setattr(probe, "gpu_run", lambda: None)

    def paddle(self, version: str = "3.0.0", *, cuda: str | None = "12.6",
               gpus: tuple[int, ...] = (), cxx11_abi: bool | None = True,
               smoke: tuple[tuple[float, ...], tuple[float, ...]] | None = None,
               smoke_error: str | None = None, libs: bool = True) -> None:
        """Install a Paddle: CUDA when ``cuda`` is given, seeing GPUs of the arches ``gpus``."""
        info = PaddleInfo(version=version, with_cuda=cuda is not None, cuda_version=cuda,
                          gpu_count=len(gpus), gpu_arches=gpus,
                          cudnn_version="9.5.1" if cuda else None, cxx11_abi=cxx11_abi)
        if gpus and smoke is None and smoke_error is None:
            smoke = ((1.0,) * 4, (2.0,) * 4)
        run = GpuRun(smoke, smoke_error) if gpus else None
        self.mp.setattr(probe, "paddle_version", lambda: version)
        self.mp.setattr(probe, "paddle_info", lambda: info)
        self.mp.setattr(probe, "gpu_run", lambda: run)
        if libs:
            pkg = self.root / "site-packages" / "paddle"
            (pkg / "base").mkdir(parents=True, exist_ok=True)
            (pkg / "libs").mkdir(exist_ok=True)
            (pkg / "base" / "libpaddle.so").write_bytes(b"not an ELF file")
            (pkg / "libs" / "libphi.so").write_bytes(b"not an ELF file")
            self.mp.setattr(doctor, "paddle_dir", lambda: pkg)

    def gpu(self, cap: str = "9.0", name: str = "NVIDIA H200", *, driver_cuda: str = "12.8",
            count: int = 1) -> None:
        """An nvidia-smi listing ``count`` GPUs of compute capability ``cap``."""
        rows = "".join(f"{i}, {name}, {cap}\\n" for i in range(count))
        self.tool("nvidia-smi", f"""
if [ "$1" = "--query-gpu=index,name,compute_cap" ]; then printf '{rows}'; exit 0; fi
printf '| NVIDIA-SMI 570.86.15   Driver Version: 570.86.15   CUDA Version: {driver_cuda} |\\n'
""")

    def cuobjdump(self, sass: Iterable[int], ptx: Iterable[int] = (), modules: int = 3) -> None:
        """A cuobjdump listing ``modules`` cubins for each arch in ``sass``, PTX for ``ptx``."""
        lines = [f"ELF file {i}: libphi.{i}.sm_{a}.cubin" for a in sass for i in range(modules)]
        lines += [f"PTX file {i}: libphi.{i}.sm_{a}.ptx" for a in ptx for i in range(modules)]
        self.tool("cuobjdump", "printf '%s\\n' " + " ".join(f"'{x}'" for x in lines) + "\n")

    def toolkit(self, version: str = "12.4", *, gcc_max: int = 13, cccl: bool = False) -> Path:
        """A CUDA toolkit under CUDA_HOME, whose host_config.h accepts gcc up to ``gcc_max``."""
        home = self.root / f"cuda-{version}"
        (home / "bin").mkdir(parents=True)
        (home / "include" / "crt").mkdir(parents=True)
        nvcc = home / "bin" / "nvcc"
        nvcc.write_text(f"#!/bin/sh\nprintf 'Cuda compilation tools, release {version}, "
                        f"V{version}.1\\n'\n")
        nvcc.chmod(0o755)
        (home / "include" / "cuda_runtime.h").write_text("")
        (home / "include" / "crt" / "host_config.h").write_text(
            f"#if defined(__GNUC__)\n#if __GNUC__ > {gcc_max}\n#error -- unsupported GNU version!"
            f"\n#endif /* __GNUC__ > {gcc_max} */\n#endif\n")
        (home / "include" / ("cccl/thrust" if cccl else "thrust")).mkdir(parents=True)
        self.mp.setenv("CUDA_HOME", str(home))
        self.mp.setattr(toolchain, "cuda_home", self._real_cuda_home)
        _clear_caches()
        return home

    def gxx(self, version: str = "12.2.0", *, abi: int = 1) -> None:
        self.tool("g++", f"""
case "$1" in
  -dumpfullversion) printf '{version}\\n' ;;
  -x) printf '#define __GNUC__ {version.split(".")[0]}\\n#define _GLIBCXX_USE_CXX11_ABI {abi}\\n' ;;
esac
""")

    def build_tools(self) -> None:
        self.tool("ninja", "printf '1.11.1\\n'\n")
        self.tool("ccache", "exit 0\n")

    def run(self) -> list[Check]:
        _clear_caches()
        return doctor.run_checks()


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeMachine]:
    yield FakeMachine(tmp_path, monkeypatch)
    _clear_caches()


def _one(checks: list[Check], name: str) -> Check:
    found = [c for c in checks if c.name == name]
    assert len(found) == 1, f"{name}: {found}"
    return found[0]


def _healthy_gpu_machine(machine: FakeMachine) -> None:
    machine.gpu("9.0")
    machine.cuobjdump(sass=[80, 90])
    machine.toolkit(version="12.4", gcc_max=13)
    machine.gxx("12.2.0")
    machine.build_tools()
    machine.paddle("3.0.0", cuda="12.6", gpus=(90,))


def test_healthy_gpu_machine_is_all_ok(machine: FakeMachine) -> None:
    _healthy_gpu_machine(machine)
    checks = machine.run()
    assert [c.name for c in checks] == [
        "Paddle", "Paddle CUDA", "GPU", "Paddle kernels", "GPU run", "CUDA toolkit",
        "CUDA driver", "CCCL headers", "g++", "C++ ABI", "ninja", "ccache"]
    assert {c.name: c.status for c in checks if c.status != "ok"} == {}
    assert _one(checks, "GPU").detail == "1x NVIDIA H200 (sm_90)"
    assert "CUDA 12.6, cuDNN 9.5.1" in _one(checks, "Paddle CUDA").detail
    assert "nvcc 12.4" in _one(checks, "CUDA toolkit").detail
    assert "gcc <= 13" in _one(checks, "g++").detail
    assert "sm_80, sm_90" in _one(checks, "Paddle kernels").detail
    assert doctor.exit_code(checks) == 0


def test_paddle_without_kernels_for_the_gpu_is_a_problem(machine: FakeMachine) -> None:
    _healthy_gpu_machine(machine)
    machine.cuobjdump(sass=[61, 70, 75, 80, 86])
    machine.paddle("2.6.2", cuda="12.0", gpus=(90,), smoke=((0.0,) * 4, (0.0,) * 4))
    checks = machine.run()
    kernels = _one(checks, "Paddle kernels")
    assert kernels.status == "problem"
    assert kernels.detail.startswith("no kernels for sm_90")
    assert "sm_61, sm_70, sm_75, sm_80, sm_86 and no PTX" in kernels.detail
    assert kernels.fix and "sm_90" in kernels.fix and "PTX" in kernels.fix
    run = _one(checks, "GPU run")
    assert run.status == "problem"
    assert "returned [0, 0, 0, 0]" in run.detail
    assert doctor.exit_code(checks) == 1


def test_cubins_of_an_older_minor_version_run_on_a_newer_gpu(machine: FakeMachine) -> None:
    _healthy_gpu_machine(machine)
    machine.gpu("8.6", "NVIDIA A10")
    machine.cuobjdump(sass=[70, 80])
    machine.paddle(gpus=(86,))
    assert _one(machine.run(), "Paddle kernels").status == "ok"


def test_ptx_only_is_a_warning(machine: FakeMachine) -> None:
    _healthy_gpu_machine(machine)
    machine.cuobjdump(sass=[80, 86], ptx=[86])
    checks = machine.run()
    kernels = _one(checks, "Paddle kernels")
    assert kernels.status == "warning"
    assert "only through PTX" in kernels.detail
    assert doctor.exit_code(checks) == 0


def test_failed_gpu_run_is_a_problem(machine: FakeMachine) -> None:
    _healthy_gpu_machine(machine)
    machine.paddle(gpus=(90,), smoke_error="RuntimeError: no kernel image is available")
    run = _one(machine.run(), "GPU run")
    assert run.status == "problem"
    assert "no kernel image is available" in run.detail


def test_missing_nvcc_with_cuda_paddle_is_a_warning(machine: FakeMachine) -> None:
    machine.gpu("9.0")
    machine.cuobjdump(sass=[90])
    machine.gxx()
    machine.build_tools()
    machine.paddle(gpus=(90,))
    checks = machine.run()
    toolkit = _one(checks, "CUDA toolkit")
    assert toolkit.status == "warning"
    assert "only `opgen build --cpu-only` builds an op" in toolkit.detail
    assert toolkit.fix and "CUDA_HOME" in toolkit.fix and "12.6" in toolkit.fix
    assert "CCCL headers" not in [c.name for c in checks]
    assert doctor.exit_code(checks) == 0


def test_gxx_newer_than_nvcc_supports_is_a_problem(machine: FakeMachine) -> None:
    _healthy_gpu_machine(machine)
    machine.gxx("14.1.0")
    checks = machine.run()
    gxx = _one(checks, "g++")
    assert gxx.status == "problem"
    assert "14.1.0 is newer than nvcc 12.4 accepts (gcc <= 13" in gxx.detail
    assert gxx.fix and "g++-13" in gxx.fix
    assert doctor.exit_code(checks) == 1


def test_gxx_newer_than_nvcc_supports_is_only_a_warning_for_cpu_paddle(
        machine: FakeMachine) -> None:
    machine.toolkit(gcc_max=13)
    machine.gxx("14.1.0")
    machine.paddle(cuda=None)
    checks = machine.run()
    assert _one(checks, "g++").status == "warning"
    assert "unused" in _one(checks, "CUDA toolkit").detail


def test_missing_compiler_is_a_problem(machine: FakeMachine) -> None:
    machine.paddle(cuda=None)
    checks = machine.run()
    assert _one(checks, "g++").status == "problem"
    assert "C++ ABI" not in [c.name for c in checks]
    assert doctor.exit_code(checks) == 1


def test_cpu_only_machine_warns_about_the_missing_gpu_only(machine: FakeMachine) -> None:
    machine.gxx()
    machine.build_tools()
    machine.paddle("3.3.1", cuda=None)
    checks = machine.run()
    assert {c.name: c.status for c in checks} == {
        "Paddle": "ok", "Paddle CUDA": "ok", "GPU": "warning", "CUDA toolkit": "ok",
        "g++": "ok", "C++ ABI": "ok", "ninja": "ok", "ccache": "ok"}
    assert "nvidia-smi not found" in _one(checks, "GPU").detail
    assert doctor.exit_code(checks) == 0


def test_cpu_paddle_on_a_gpu_machine_is_a_warning(machine: FakeMachine) -> None:
    machine.gpu("9.0")
    machine.gxx()
    machine.paddle(cuda=None)
    cuda = _one(machine.run(), "Paddle CUDA")
    assert cuda.status == "warning"
    assert cuda.fix and "paddlepaddle-gpu" in cuda.fix


def test_nvidia_smi_without_a_driver_is_a_warning(machine: FakeMachine) -> None:
    machine.tool("nvidia-smi", "printf 'NVIDIA-SMI has failed because it could not communicate "
                 "with the NVIDIA driver.\\n'\nexit 9\n")
    machine.gxx()
    machine.paddle(cuda=None)
    gpu = _one(machine.run(), "GPU")
    assert gpu.status == "warning"
    assert "NVIDIA-SMI has failed" in gpu.detail


def test_missing_paddle_is_a_problem(machine: FakeMachine) -> None:
    machine.gxx()
    checks = machine.run()
    paddle = _one(checks, "Paddle")
    assert paddle.status == "problem"
    assert paddle.fix and "pip install paddlepaddle" in paddle.fix
    assert not {"Paddle CUDA", "Paddle kernels", "GPU run", "C++ ABI"} & {c.name for c in checks}
    assert doctor.exit_code(checks) == 1


def test_paddle_that_fails_to_import_is_a_problem(machine: FakeMachine) -> None:
    machine.gxx()
    machine.mp.setattr(probe, "paddle_version", lambda: "2.6.2")
    paddle = _one(machine.run(), "Paddle")
    assert paddle.status == "problem"
    assert "import paddle" in paddle.detail


@pytest.mark.parametrize(("driver_cuda", "status"), [("12.8", "ok"), ("12.2", "warning"),
                                                     ("11.8", "problem")])
def test_driver_against_toolkit_and_paddle_cuda(machine: FakeMachine, driver_cuda: str,
                                                status: str) -> None:
    _healthy_gpu_machine(machine)
    machine.gpu("9.0", driver_cuda=driver_cuda)
    driver = _one(machine.run(), "CUDA driver")
    assert driver.status == status
    assert f"supports CUDA {driver_cuda}" in driver.detail
    assert (driver.fix is None) == (status == "ok")


def test_cuda_13_keeps_thrust_in_cccl(machine: FakeMachine) -> None:
    _healthy_gpu_machine(machine)
    machine.toolkit(version="13.0", gcc_max=15, cccl=True)
    machine.paddle(cuda="13.0", gpus=(90,))
    cccl = _one(machine.run(), "CCCL headers")
    assert cccl.status == "ok"
    assert "include/cccl" in cccl.detail


def test_missing_thrust_is_a_problem_for_gpu_builds(machine: FakeMachine) -> None:
    _healthy_gpu_machine(machine)
    home = Path(str(toolchain.cuda_home()))
    (home / "include" / "thrust").rmdir()
    assert _one(machine.run(), "CCCL headers").status == "problem"


def test_toolkit_of_another_cuda_major_than_paddle_is_a_warning(machine: FakeMachine) -> None:
    _healthy_gpu_machine(machine)
    machine.paddle("2.6.2", cuda="11.8", gpus=(90,))
    toolkit = _one(machine.run(), "CUDA toolkit")
    assert toolkit.status == "warning"
    assert "CUDA 11.8" in toolkit.detail


def test_a_cuda_home_without_nvcc_is_named_not_passed_over(machine: FakeMachine,
                                                            tmp_path: Path) -> None:
    _healthy_gpu_machine(machine)
    home = toolchain.cuda_home()
    machine.mp.setenv("CUDA_HOME", str(tmp_path / "cuda-typo"))
    machine.mp.setenv("CUDA_PATH", str(home))  # a toolkit found otherwise
    _clear_caches()
    toolkit = _one(machine.run(), "CUDA toolkit")
    assert toolkit.status == "problem"  # Paddle here is CUDA: its builds would stop
    assert toolkit.detail == (f"CUDA_HOME={tmp_path / 'cuda-typo'} has no bin/nvcc ({home} is "
                              "the toolkit found otherwise)")
    assert toolchain.misdirected_cuda_variable() == ("CUDA_HOME", str(tmp_path / "cuda-typo"))
    machine.paddle(cuda=None)  # for CPU-only Paddle it is only a warning
    assert _one(machine.run(), "CUDA toolkit").status == "warning"


def test_the_toolkit_is_named_by_its_real_path(machine: FakeMachine, tmp_path: Path) -> None:
    home = machine.toolkit()
    link = tmp_path / "cuda"
    link.symlink_to(home)
    machine.mp.setenv("CUDA_HOME", str(link))
    _clear_caches()
    # however it is named, one toolkit gives one build key
    assert toolchain.cuda_home() == home.resolve()
    assert toolchain.misdirected_cuda_variable() is None


def test_paddle_with_the_old_abi_is_a_problem(machine: FakeMachine) -> None:
    machine.gxx(abi=0)
    machine.paddle(cuda=None, cxx11_abi=False)
    abi = _one(machine.run(), "C++ ABI")
    assert abi.status == "problem"
    assert "old ABI" in abi.detail


def test_compiler_defaulting_to_the_old_abi_is_fine(machine: FakeMachine) -> None:
    machine.gxx(abi=0)
    machine.paddle(cuda=None, cxx11_abi=True)
    abi = _one(machine.run(), "C++ ABI")
    assert abi.status == "ok"
    assert "-D_GLIBCXX_USE_CXX11_ABI=1" in abi.detail


def test_paddle_abi_falls_back_to_the_library_symbols(machine: FakeMachine) -> None:
    machine.gxx(abi=1)
    machine.paddle(cuda=None, cxx11_abi=None)
    lib = doctor.paddle_dir() / "base" / "libpaddle.so"  # type: ignore[operator]
    lib.write_bytes(b"\0_ZNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEE\0")
    assert _one(machine.run(), "C++ ABI").status == "ok"
    lib.write_bytes(b"\0_ZNSs4_Rep20_S_empty_rep_storageE\0")
    assert _one(machine.run(), "C++ ABI").status == "problem"


def test_missing_ninja_and_ccache_are_warnings_only(machine: FakeMachine) -> None:
    _healthy_gpu_machine(machine)
    for tool in ("ninja", "ccache"):
        (machine.bin / tool).unlink()
    checks = machine.run()
    assert _one(checks, "ninja").status == "warning"
    assert _one(checks, "ccache").status == "warning"
    assert doctor.exit_code(checks) == 0


def _elf_with_fatbin(modules: list[list[tuple[int, int]]]) -> bytes:
    """A minimal ELF64 whose .nv_fatbin holds one fat binary per module of (kind, arch) entries."""
    fatbin = b""
    for entries in modules:
        body = b""
        for kind, arch in entries:
            payload = b"\0" * 16
            header = struct.pack("<HHIQII", kind, 0x101, 64, len(payload), 0, 0)
            header += struct.pack("<HHI", 0, 0, arch).ljust(64 - len(header), b"\0")
            body += header + payload
        fatbin += struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body)) + body
    shstrtab = b"\0.nv_fatbin\0.shstrtab\0"
    data_off = 64
    strtab_off = data_off + len(fatbin)
    shoff = (strtab_off + len(shstrtab) + 7) // 8 * 8
    ident = b"\x7fELF\x02\x01\x01".ljust(16, b"\0")
    elf_header = ident + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, shoff, 0, 64, 0, 0, 64, 3,
                                     2)
    sections = [struct.pack("<IIQQQQIIQQ", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
                struct.pack("<IIQQQQIIQQ", 1, 1, 0, 0, data_off, len(fatbin), 0, 0, 8, 0),
                struct.pack("<IIQQQQIIQQ", 12, 3, 0, 0, strtab_off, len(shstrtab), 0, 0, 1, 0)]
    image = elf_header + fatbin + shstrtab
    return image.ljust(shoff, b"\0") + b"".join(sections)


def test_fatbin_headers_are_read_without_cuobjdump(machine: FakeMachine) -> None:
    _healthy_gpu_machine(machine)
    (machine.bin / "cuobjdump").unlink()
    pkg = doctor.paddle_dir()
    assert pkg is not None
    (pkg / "libs" / "libphi.so").write_bytes(_elf_with_fatbin(
        [[(2, 61), (2, 86)], [(2, 61), (2, 86)], [(2, 61), (2, 86), (2, 90)]]))
    (pkg / "base" / "libpaddle.so").write_bytes(_elf_with_fatbin([[(2, 61), (2, 86), (1, 86)]]))
    image = doctor.kernel_image(pkg)
    assert image == KernelImage(modules=4, sass={61: 4, 86: 4, 90: 1}, ptx={86: 1},
                                source="fatbin headers")
    kernels = _one(machine.run(), "Paddle kernels")
    assert kernels.status == "problem"
    assert "sm_61, sm_86 and no PTX (from fatbin headers)" in kernels.detail


def test_coverage_follows_cuda_compatibility_rules() -> None:
    image = KernelImage(modules=10, sass={80: 10}, ptx={75: 5}, source="cuobjdump")
    assert image.coverage(80) == (1.0, 0.5)
    assert image.coverage(86) == (1.0, 0.5)  # same major, newer minor
    assert image.coverage(90) == (0.0, 0.5)  # a cubin never crosses majors; PTX does
    assert image.coverage(75) == (0.0, 0.5)  # nor runs on an older GPU
    assert image.coverage(70) == (0.0, 0.0)


def test_report_as_table_and_json() -> None:
    checks = [Check("Paddle", "ok", "3.3.1 in /venv", None),
              Check("g++", "problem", "14.1.0 is newer than nvcc 12.4 accepts", "install g++-13"),
              Check("ccache", "warning", "not found", "apt install ccache")]
    table = doctor.report(checks, as_json=False, width=100)
    lines = table.splitlines()
    assert any(line.split()[:3] == ["g++", "problem", "14.1.0"] for line in lines)
    assert "fix: install g++-13" in table
    assert "1 ok, 1 warning(s), 1 problem(s): a build would fail" in table
    assert "\x1b[" not in table and all(line == line.rstrip() for line in lines)
    assert "\x1b[" in doctor.report(checks, as_json=False, color=True, width=100)
    data = json.loads(doctor.report(checks, as_json=True))
    assert data["exit_code"] == 1
    assert data["summary"] == {"ok": 1, "warning": 1, "problem": 1}
    assert data["checks"][1] == {"name": "g++", "status": "problem",
                                 "detail": "14.1.0 is newer than nvcc 12.4 accepts",
                                 "fix": "install g++-13"}


def test_exit_code() -> None:
    assert doctor.exit_code([]) == 0
    assert doctor.exit_code([Check("a", "ok", "", None), Check("b", "warning", "", "x")]) == 0
    assert doctor.exit_code([Check("a", "ok", "", None), Check("b", "problem", "", "x")]) == 1


def test_real_environment() -> None:
    """The real doctor on this machine: a sane report whatever is installed."""
    _clear_caches()
    try:
        checks = doctor.run_checks()
    finally:
        _clear_caches()
    assert checks and all(isinstance(c, Check) for c in checks)
    assert all(c.status in ("ok", "warning", "problem") and c.detail for c in checks)
    assert all(c.fix for c in checks if c.status != "ok")
    paddle = checks[0]
    assert paddle.name == "Paddle"
    version = probe.paddle_version()
    if version is None:
        assert paddle.status == "problem"
    else:
        assert paddle.detail.startswith(version) and sys.prefix in paddle.detail
    assert doctor.exit_code(checks) in (0, 1)
