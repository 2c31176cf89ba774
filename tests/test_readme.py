"""The README's API example runs and prints what its comments say."""

import math
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_api_example_runs_and_its_comments_hold():
    code = re.search(r"## The API in ten lines\n\n```python\n(.*?)```", README.read_text(),
                     re.S).group(1)
    assert len(code.strip().splitlines()) <= 10
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    printed = run.stdout.splitlines()
    claimed = re.findall(r"print\(.*?\)\s+# (\[[^\]]*\])", code)
    assert printed == claimed
    w1 = math.e / (1 + math.e)  # hand value: softmax(0, 1)[1]
    assert claimed == [f"[{2 * (1 - w1):.3f} {3 * w1:.3f}]", f"[{1 - w1:.3f} {w1:.3f}]"]
