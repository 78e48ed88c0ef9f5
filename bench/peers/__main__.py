"""``python -m bench.peers``: the same workloads on keepgoing and DBOS, alternating, in one run.

Examples::

    python -m bench.peers                  # 5 repetitions of every workload
    python -m bench.peers --quick          # 3 short repetitions: a smoke test
    python -m bench.peers --write-doc      # rewrite the table in docs/benchmarks.md

Run it in ``.venv-peers`` (``make bench-peers`` builds it): DBOS is installed
there only, never as a dependency of keepgoing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path

from bench._harness import machine_facts, median
from bench.peers._shapes import SHAPES, Shape

SYSTEMS = ("dbos", "keepgoing")
DOC = Path(__file__).resolve().parents[2] / "docs" / "benchmarks.md"
START, END = "<!-- peers:start -->", "<!-- peers:end -->"


def one(system: str, shape: str, per_run: int) -> float:
    """One figure from a fresh subprocess (and, for DBOS, a fresh database file)."""
    with tempfile.TemporaryDirectory(prefix=f"peers-{system}-") as folder:
        command = [
            sys.executable,
            "-m",
            f"bench.peers.{system}_side",
            shape,
            "--per-run",
            str(per_run),
        ]
        if system == "dbos":
            command += ["--db", os.path.join(folder, "dbos.db")]
        done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
        if done.returncode != 0:
            raise SystemExit(f"{system} {shape} failed:\n{done.stderr[-4000:]}")
        last = done.stdout.strip().splitlines()[-1]
        return float(json.loads(last)["value"])


def ratio(shape: Shape, dbos: float, keepgoing: float) -> str:
    """How many times better keepgoing is (a figure below 1 means worse)."""
    if shape.higher_is_better:
        return f"{keepgoing / dbos:.1f}x" if dbos > 0 else "—"
    return f"{dbos / keepgoing:.1f}x" if keepgoing > 0 else "—"


def table(results: dict[str, dict[str, list[float]]], repeat: int) -> str:
    facts = machine_facts()
    lines = [
        f"Medians of {repeat} repetitions, each system in a fresh process on a fresh SQLite file "
        "(WAL, `synchronous=FULL`), alternating; "
        f"{facts['cpu_count']} CPUs ({facts['cpu_model']}), Python {facts['python']}, "
        f"SQLite {facts['sqlite']}, DBOS {_dbos_version()}, keepgoing {facts['keepgoing_source']}, "
        f"load {facts['load_average_1m']} at the end.",
        "",
        "| measure | DBOS | keepgoing | keepgoing vs DBOS |",
        "|---|---|---|---|",
    ]
    for shape in SHAPES:
        d = median(results[shape.name]["dbos"])
        k = median(results[shape.name]["keepgoing"])
        unit = shape.unit
        lines.append(f"| {shape.label} | {d:.2f} {unit} | {k:.2f} {unit} | {ratio(shape, d, k)} |")
    return "\n".join(lines)


def _dbos_version() -> str:
    return version("dbos")


def write_doc(text: str) -> None:
    doc = DOC.read_text()
    if START not in doc or END not in doc:
        raise SystemExit(f"{DOC} has no {START} … {END} section to rewrite")
    head, rest = doc.split(START, 1)
    _, tail = rest.split(END, 1)
    DOC.write_text(f"{head}{START}\n{text}\n{END}{tail}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.peers", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help="3 short repetitions: a smoke test")
    parser.add_argument("--repeat", type=int, default=None, help="repetitions (default 5, min 3)")
    parser.add_argument("--json", metavar="PATH", help="also write every figure as JSON")
    parser.add_argument(
        "--write-doc", action="store_true", help="rewrite the table in docs/benchmarks.md"
    )
    args = parser.parse_args(argv)
    repeat = args.repeat or (3 if args.quick else 5)
    if repeat < 3:
        parser.error("--repeat must be at least 3: each figure is a median of repetitions")
    if args.write_doc and args.quick:
        parser.error("--write-doc needs a full run, not --quick")
    per_run = 3 if args.quick else 10
    results: dict[str, dict[str, list[float]]] = {s.name: {k: [] for k in SYSTEMS} for s in SHAPES}
    for rep in range(repeat):
        for shape in SHAPES:
            order = SYSTEMS if rep % 2 == 0 else tuple(reversed(SYSTEMS))
            for system in order:
                value = one(system, shape.name, per_run)
                results[shape.name][system].append(value)
                print(
                    f"  rep {rep + 1} {shape.name:<9} {system:<9} {value:10.2f} {shape.unit}",
                    flush=True,
                )
    text = table(results, repeat)
    print()
    print(text)
    if args.json:
        Path(args.json).write_text(json.dumps({"repeat": repeat, "results": results}, indent=2))
    if args.write_doc:
        write_doc(text)


if __name__ == "__main__":
    main()
