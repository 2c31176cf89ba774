"""The processor description (kernels/processor.py) that the benchmark prints and the tile
cache is keyed on."""

import os
from pathlib import Path

import pytest

from qkv.kernels import processor


def test_sizes_and_cpu_lists_as_sysfs_writes_them():
    assert processor._bytes("512K") == 512 * 1024
    assert processor._bytes("32768K") == 32 * 2**20
    assert processor._bytes("2M") == 2 * 2**20 and processor._bytes("48") == 48
    assert processor._count_cpus("0") == 1 and processor._count_cpus("0-3,8,10-11") == 7


def test_caches_from_a_sysfs_tree(tmp_path):
    for index, (level, kind, size, shared) in enumerate(
        [
            (1, "Data", "48K", "0,64"),
            (1, "Instruction", "32K", "0,64"),
            (2, "Unified", "2048K", "0,64"),
            (3, "Unified", "105M", "0-127"),
        ]
    ):
        d = tmp_path / f"index{index}"
        d.mkdir()
        for name, value in (
            ("level", level),
            ("type", kind),
            ("size", size),
            ("shared_cpu_list", shared),
        ):
            (d / name).write_text(f"{value}\n")
    assert processor._caches(tmp_path) == {
        "L1d": (48 * 1024, 2),
        "L2": (2 * 2**20, 2),
        "L3": (105 * 2**20, 128),
    }


@pytest.mark.skipif(not Path("/proc/cpuinfo").exists(), reason="needs Linux's /proc/cpuinfo")
def test_this_machine_is_named_with_its_widest_vector_unit():
    text = Path("/proc/cpuinfo").read_text()
    first = text.split("\n\n")[0]
    flags = next(
        (
            ln.split(":", 1)[1].split()
            for ln in first.splitlines()
            if ln.startswith(("flags", "Features"))
        ),
        [],
    )
    cpu = processor.current()
    assert cpu.cores == os.cpu_count()
    if "avx512f" in flags:
        assert (cpu.vector, cpu.vector_bits) == ("AVX-512", 512)
    elif "avx2" in flags:
        assert (cpu.vector, cpu.vector_bits) == ("AVX2", 256)
    names = [
        ln.split(":", 1)[1].strip() for ln in first.splitlines() if ln.startswith("model name")
    ]
    if names:
        assert cpu.model == " ".join(names[0].split()) and cpu.model in cpu.describe()
    assert f"{cpu.cores} cores" in cpu.describe() and cpu.key["cores"] == cpu.cores
