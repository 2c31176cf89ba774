"""The processor the kernels run on: its name, cores, vector width and caches, read from Linux
(``/proc/cpuinfo``, ``/sys/devices/system/cpu``) with portable fallbacks elsewhere.

``qkv bench`` prints it beside every figure, and the tile tuner (``kernels/tuning.py``) keys
its cache on it: tile sizes measured on one processor are not trusted on another.
"""

from __future__ import annotations

import functools
import os
import platform
from dataclasses import dataclass, field
from pathlib import Path

# /proc/cpuinfo flags -> (vector instruction set, register width in bits), widest first
VECTOR_FLAGS = (
    ("avx512f", "AVX-512", 512),
    ("avx2", "AVX2", 256),
    ("avx", "AVX", 256),
    ("sve", "SVE", 128),  # at least 128; the hardware's length is not in cpuinfo
    ("asimd", "NEON", 128),
    ("sse2", "SSE2", 128),
)


@dataclass(frozen=True)
class Processor:
    model: str  # "AMD EPYC 9B45", or the platform's name when /proc/cpuinfo has none
    signature: str  # vendor family/model/stepping, e.g. "AuthenticAMD 25/1/1"
    cores: int  # logical CPUs online (not this process's affinity: that can change)
    vector: str  # widest vector instruction set, e.g. "AVX2"
    vector_bits: int  # its register width
    caches: dict = field(default_factory=dict)  # "L1d", "L2", "L3" -> (bytes, CPUs sharing one)

    @property
    def key(self) -> dict:
        """What identifies this processor for a cache of measurements."""
        return {"model": self.model, "signature": self.signature, "cores": self.cores}

    def describe(self) -> str:
        """One line: model, cores, vector width, caches (per instance, and how many CPUs share
        one)."""
        parts = [f"{self.model} ({self.signature})", f"{self.cores} cores"]
        parts.append(f"{self.vector} {self.vector_bits}-bit" if self.vector_bits else "vector ?")
        for name in ("L1d", "L2", "L3"):
            if name in self.caches:
                size, shared = self.caches[name]
                parts.append(f"{name} {_size(size)}" + (f"/{shared} cores" if shared > 1 else ""))
        return " · ".join(parts)


@functools.cache
def current() -> Processor:
    """This machine's processor (read once per process)."""
    info = _cpuinfo()
    flags = set(info.get("flags", info.get("Features", "")).split())
    vector, bits = next(((name, b) for f, name, b in VECTOR_FLAGS if f in flags), ("?", 0))
    model = info.get("model name") or info.get("Model") or platform.processor() or "unknown CPU"
    vendor = info.get("vendor_id") or info.get("CPU implementer") or platform.machine()
    numbers = [info.get(k) for k in ("cpu family", "model", "stepping")]
    if not any(numbers):  # ARM: implementer/part/variant/revision
        numbers = [info.get(k) for k in ("CPU part", "CPU variant", "CPU revision")]
    signature = f"{vendor} " + "/".join(n or "?" for n in numbers)
    return Processor(
        model=" ".join(model.split()),
        signature=signature,
        cores=os.cpu_count() or 1,
        vector=vector,
        vector_bits=bits,
        caches=_caches(),
    )


def _cpuinfo() -> dict:
    """The first processor's block of /proc/cpuinfo as {field: value}; {} where there is none."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {}
    info: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if info:
                break  # the first CPU's block is enough
            continue
        name, _, value = line.partition(":")
        info.setdefault(name.strip(), value.strip())
    return info


def _caches(root="/sys/devices/system/cpu/cpu0/cache") -> dict:
    """{"L1d": (bytes, sharing CPUs), "L2": ..., "L3": ...} from sysfs; {} where there is none."""
    out = {}
    for index in sorted(Path(root).glob("index*")):
        try:
            level = (index / "level").read_text().strip()
            kind = (index / "type").read_text().strip()
            size = _bytes((index / "size").read_text().strip())
            shared = _count_cpus((index / "shared_cpu_list").read_text().strip())
        except (OSError, ValueError):
            continue
        if kind == "Instruction":
            continue
        out[f"L{level}" + ("d" if kind == "Data" else "")] = (size, shared)
    return out


def _bytes(text: str) -> int:
    """'512K' -> 524288, '32M' -> 33554432, '1024' -> 1024."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if text and text[-1].upper() in units:
        return int(text[:-1]) * units[text[-1].upper()]
    return int(text)


def _count_cpus(text: str) -> int:
    """'0-3,8' -> 5."""
    count = 0
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        count += int(hi or lo) - int(lo) + 1
    return count


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 and n % (1 << 20) == 0 else f"{n >> 10} KiB"
