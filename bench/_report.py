"""Presenting results: the console table, the JSON file and the table in docs/benchmarks.md."""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from bench._harness import BenchError, Measurement

__all__ = ["console_table", "doc_section", "fmt", "write_doc", "write_json"]

DOC_PATH = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "benchmarks.md"
)
BEGIN = "<!-- bench:results:begin (written by `python -m bench --write-doc`) -->"
END = "<!-- bench:results:end -->"


def fmt(value: float, unit: str) -> str:
    if unit == "workflows/s":
        return f"{value:,.0f} {unit}"
    digits = 3 if abs(value) < 1 else 2
    return f"{value:.{digits}f} {unit}"


def target_text(m: Measurement) -> str:
    if m.target is None or m.op is None:
        return "none (reported)"
    word = "at most" if m.op == "<=" else "at least"
    return f"{word} {m.target:,g} {m.unit}"


def met_text(m: Measurement) -> str:
    if m.met is None:
        return "n/a"
    if m.met:
        return "yes"
    assert m.target is not None
    gap = abs(m.value - m.target)
    word = "over" if m.op == "<=" else "short"
    return f"no ({fmt(gap, m.unit)} {word}, {gap / m.target:.0%})"


def console_table(results: Sequence[Measurement], facts: dict[str, Any]) -> None:
    console = Console()
    if not console.is_terminal:
        console = Console(width=160)
    table = Table(title="keepgoing benchmarks (medians over repetitions)")
    for column in ("benchmark", "what", "median", "target", "met?", "per repetition"):
        table.add_column(column)
    for m in results:
        style = {True: "green", False: "red", None: ""}[m.met]
        runs = ", ".join(fmt(v, m.unit).removesuffix(m.unit).strip() for v in m.runs)
        table.add_row(
            m.name, m.label, fmt(m.value, m.unit), target_text(m), met_text(m), runs, style=style
        )
    console.print(table)
    console.print(_facts_line(facts))
    if facts["load_average_1m"] > 0.5:
        console.print(
            f"[yellow]warning: the load average was {facts['load_average_1m']} when the run "
            "started; other work on this machine makes these figures noisy[/yellow]"
        )


def _facts_line(facts: dict[str, Any]) -> str:
    return (
        f"{facts['cpu_count']} CPUs ({facts['cpu_model']}), {facts['platform']}, "
        f"Python {facts['python']}, SQLite {facts['sqlite']}, "
        f"journal_mode={facts['journal_mode']}, synchronous={facts['synchronous']}, "
        f"load average at start {facts['load_average_1m']}"
    )


def write_json(
    path: str, results: Sequence[Measurement], facts: dict[str, Any], **settings: Any
) -> None:
    document = {
        "when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": facts,
        "settings": settings,
        "results": [m.as_json() for m in results],
    }
    with open(path, "w", encoding="utf-8") as out:
        json.dump(document, out, indent=2)
        out.write("\n")


def doc_section(results: Sequence[Measurement], facts: dict[str, Any], repeat: int) -> str:
    day = dt.date.today().isoformat()
    lines = [
        BEGIN,
        "",
        f"Measured on {day} with `python -m bench --repeat {repeat}`: "
        f"medians of {repeat} repetitions.",
        "",
        "| benchmark | median | target | met? |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| `{m.name}`: {m.label} | {fmt(m.value, m.unit)} | {target_text(m)} | {met_text(m)} |"
        for m in results
    ]
    spread = "; ".join(
        f"`{m.name}` {fmt(min(m.runs), m.unit).removesuffix(m.unit).strip()}"
        f" to {fmt(max(m.runs), m.unit)}"
        for m in results
    )
    lines += [
        "",
        f"Spread over the repetitions (lowest to highest): {spread}.",
        "",
        f"Machine: {_facts_line(facts)}. keepgoing measured: {facts['keepgoing_source']}.",
        "",
        END,
    ]
    return "\n".join(lines)


def write_doc(results: Sequence[Measurement], facts: dict[str, Any], repeat: int) -> str:
    """Replace the results section of docs/benchmarks.md; return the path written."""
    try:
        with open(DOC_PATH, encoding="utf-8") as doc:
            text = doc.read()
    except OSError as exc:
        raise BenchError(f"cannot read {DOC_PATH}: {exc}") from exc
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise BenchError(f"{DOC_PATH} has no results section (the {BEGIN!r} ... {END!r} markers)")
    text = text[:start] + doc_section(results, facts, repeat) + text[end + len(END) :]
    with open(DOC_PATH, "w", encoding="utf-8") as doc:
        doc.write(text)
    return DOC_PATH
