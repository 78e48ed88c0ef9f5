"""The support-digest agent's customer directory keeps one quota for every caller: two
lookups a second, its state in a file under a lock, refusing the rest with 429."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

AGENT = Path(__file__).resolve().parents[3] / "examples" / "support_digest"

# Each process asks the directory 3 times at once; the quota is one bucket for all.
ASK = (
    "import sys\n"
    f"sys.path.insert(0, {str(AGENT)!r})\n"
    "from agent import _directory_admits\n"
    "print(sum(_directory_admits('CUS-1') for _ in range(3)))\n"
)


def _env(state: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KEEPGOING_", "DIGEST_"))}
    env["SUPPORT_DIGEST_STATE"] = str(state)
    return env


def test_callers_in_several_processes_share_one_quota(tmp_path: Path) -> None:
    state = tmp_path / "state"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", ASK], env=_env(state), stdout=subprocess.PIPE, text=True
        )
        for _ in range(3)
    ]
    admitted = [int(p.communicate(timeout=60)[0].strip()) for p in procs]
    answers = [line.split() for line in (state / "directory.log").read_text().splitlines()]
    assert len(answers) == 9
    # A full bucket holds two; the processes start close together, but however they
    # interleave, far fewer than the nine requests go through.
    ok = [a for a in answers if a[2] == "200"]
    assert sum(admitted) == len(ok)
    assert 2 <= len(ok) < 9
    assert all(a[2] in {"200", "429"} for a in answers)
    saved = json.loads((state / "directory.json").read_text())
    assert set(saved) == {"tokens", "at"} and 0 <= saved["tokens"] <= 2
    assert not list(state.glob(".directory.*"))  # each save was renamed into place


def test_a_damaged_state_file_starts_a_full_bucket(tmp_path: Path) -> None:
    (tmp_path / "directory.json").write_text("{not json")
    done = subprocess.run(
        [sys.executable, "-c", ASK],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "2"  # two of three: the bucket started full
