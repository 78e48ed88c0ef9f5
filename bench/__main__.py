"""``python -m bench``: run the benchmarks and report medians against their targets.

Examples::

    python -m bench                      # every benchmark, 5 repetitions each
    python -m bench --quick              # a smoke test: 3 short repetitions
    python -m bench --only latency --repeat 7
    python -m bench --json results.json --write-doc
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from types import ModuleType

from bench import latency, per_step, recovery, sleep_overhead, throughput
from bench._harness import BenchError, Config, Measurement, machine_facts
from bench._report import console_table, write_doc, write_json

BENCHMARKS: dict[str, ModuleType] = {
    m.NAME: m for m in (per_step, latency, throughput, sleep_overhead, recovery)
}
MIN_REPEAT = 3


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench", description="keepgoing benchmarks (see docs/benchmarks.md)."
    )
    parser.add_argument("--quick", action="store_true", help="3 short repetitions: a smoke test")
    parser.add_argument(
        "--only",
        action="append",
        choices=sorted(BENCHMARKS),
        metavar="NAME",
        help=f"run only this benchmark (repeatable): {', '.join(BENCHMARKS)}",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=None,
        help=f"repetitions per benchmark (default 5, min {MIN_REPEAT})",
    )
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument(
        "--write-doc",
        action="store_true",
        help="rewrite the results table in docs/benchmarks.md (full runs only)",
    )
    args = parser.parse_args(argv)
    if args.repeat is None:
        args.repeat = MIN_REPEAT if args.quick else 5
    if args.repeat < MIN_REPEAT:
        parser.error(
            f"--repeat must be at least {MIN_REPEAT}: each figure is a median of repetitions"
        )
    if args.write_doc and (args.quick or args.only):
        parser.error("--write-doc needs a full run: drop --quick and --only")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    log: Callable[[str], None] = lambda line: print(line, flush=True)  # noqa: E731
    config = Config(repeat=args.repeat, quick=args.quick, log=log)
    facts = machine_facts()
    results: list[Measurement] = []
    failures: list[str] = []
    for name in args.only or list(BENCHMARKS):
        log(f"{name}: {args.repeat} repetitions{' (quick)' if args.quick else ''}")
        began = time.perf_counter()
        try:
            results.extend(BENCHMARKS[name].run(config))
        except BenchError as exc:
            failures.append(f"{name}: {exc}")
            log(f"  {name} FAILED: {exc}")
        log(f"  {name} took {time.perf_counter() - began:.1f} s")
    console_table(results, facts)
    if args.json:
        write_json(args.json, results, facts, repeat=args.repeat, quick=args.quick)
    if args.write_doc and not failures:
        log(f"wrote {write_doc(results, facts, args.repeat)}")
    for failure in failures:
        print(f"error: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
