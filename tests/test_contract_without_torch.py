"""The NumPy half of the contract suite runs, and passes, where torch is not installed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.mark.slow
def test_the_numpy_half_of_the_contract_runs_without_torch():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE / "fixtures"), *sys.path])}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no_torch",
            "-p",
            "no:cacheprovider",
            str(HERE / "test_contract.py"),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=HERE.parent,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    passed = int(re.search(r"(\d+) passed", proc.stdout).group(1))
    skipped = int(re.search(r"(\d+) skipped", proc.stdout).group(1))
    assert passed > 200 and skipped > 0, proc.stdout[-500:]  # ran the NumPy cases, skipped torch's
