"""``python -m bench.ui_open``: how long a run of 10,000 events takes to open in the browser.

Runs the browser test ``tests/ui/test_browser.py::…10000…`` (a real server,
Debian's chromium, a run of exactly 10,000 history events) ``--repeat`` times;
each test run opens the page five times and prints the milliseconds from
navigation to the timeline drawn with the whole history. Reports the median of
every open and the spread. Target: at most 1 s. Run it alone on the machine
(``flock /tmp/kg-bench.lock``): the figure is mostly the server reading and
encoding the history, which other load slows.

Examples::

    python -m bench.ui_open
    python -m bench.ui_open --repeat 5
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEST = "tests/ui/test_browser.py"
FIGURE = re.compile(r"UI_OPEN_MS events=(\d+) opened_ms=([\d,]+)")
TARGET_MS = 1000


def measure(repeat: int) -> tuple[int, list[int]]:
    opens: list[int] = []
    events = 0
    for _ in range(repeat):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                TEST,
                "-q",
                "-s",
                "-k",
                "10000",
                "-p",
                "no:cacheprovider",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            check=False,
        )
        found = FIGURE.search(done.stdout)
        if done.returncode != 0 or found is None:
            raise SystemExit(
                f"the browser test failed:\n{done.stdout[-4000:]}\n{done.stderr[-2000:]}"
            )
        events = int(found.group(1))
        opens.extend(int(x) for x in found.group(2).split(","))
    return events, opens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="test runs (5 opens each)")
    args = parser.parse_args()
    events, opens = measure(max(1, args.repeat))
    median = statistics.median(opens)
    met = "yes" if median <= TARGET_MS else f"no ({median - TARGET_MS:.0f} ms over)"
    print(f"run of {events} events, opened {len(opens)} times")
    print(f"median {median:.0f} ms (target at most {TARGET_MS} ms: {met})")
    print(f"spread {min(opens)} to {max(opens)} ms; every open: {', '.join(map(str, opens))}")
    print(f"load average at start: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
