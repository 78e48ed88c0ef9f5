"""The guide's "Flow control" example runs as written, and says what it prints."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

GUIDE = Path(__file__).resolve().parent.parent / "docs" / "guide.md"


def _example() -> str:
    text = GUIDE.read_text(encoding="utf-8")
    section = text.split("## Flow control\n", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match is not None, "the section has no example"
    return match.group(1)


def test_the_guides_flow_control_example_runs(tmp_path: Path) -> None:
    script = tmp_path / "invoices.py"
    script.write_text(_example(), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str([f"invoice for c{i} (pro)" for i in (1, 2, 3)])
