"""Reading the device code of a shared library without a CUDA toolkit: its ELF sections and the
fat binaries in ``.nv_fatbin``. ``opgen doctor`` reads Paddle's kernels with it, ``opgen build
--wheel`` checks the op's own library.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Iterator
from pathlib import Path

_FATBIN_MAGIC = 0xBA55ED50
_FATBIN_MAGIC_BYTES = struct.pack("<I", _FATBIN_MAGIC)


def _elf_section(data: mmap.mmap, wanted: str) -> tuple[int, int] | None:
    """(offset, size) of a section of a 64-bit little-endian ELF file, or None."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return None
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    if not shoff or shstrndx >= shnum or shoff + shnum * shentsize > len(data):
        return None
    headers = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    strtab = headers[shstrndx][4]
    for name_off, _type, _flags, _addr, offset, size in headers:
        start = strtab + name_off
        end = data.find(b"\0", start)
        if data[start:end] == wanted.encode() and offset + size <= len(data):
            return offset, size
    return None


def fatbin_modules(path: Path) -> Iterator[tuple[set[int], set[int]]]:
    """(cubin arches, PTX arches) of each fat binary in a library's .nv_fatbin section.

    Reads only the headers (a few KiB of a multi-GiB library), so it is fast and needs no CUDA
    toolkit. Layout: a container header (magic, version, header size, payload size), then
    entries of (kind: 1 PTX / 2 cubin, flags, header size, payload size, ..., arch at byte 28).
    """
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        section = _elf_section(data, ".nv_fatbin")
        if section is None:
            return
        pos, end = section[0], section[0] + section[1]
        while pos + 16 <= end:
            magic, _version, header_size, payload = struct.unpack_from("<IHHQ", data, pos)
            if magic != _FATBIN_MAGIC:
                pos = data.find(_FATBIN_MAGIC_BYTES, pos + 1, end)
                if pos < 0:
                    return
                continue
            sass: set[int] = set()
            ptx: set[int] = set()
            entry, stop = pos + header_size, min(pos + header_size + payload, end)
            while entry + 32 <= stop:
                kind, _flags, entry_header, size = struct.unpack_from("<HHIQ", data, entry)
                (arch,) = struct.unpack_from("<I", data, entry + 28)
                (sass if kind == 2 else ptx if kind == 1 else set()).add(arch)
                if entry_header == 0:
                    break
                entry += entry_header + size
            yield sass, ptx
            pos = stop
