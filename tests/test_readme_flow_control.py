"""The README's flow-control example runs as written (its decorators check their limits)."""

from __future__ import annotations

from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_the_readmes_flow_control_example_runs() -> None:
    text = README.read_text()
    section = text[text.index("## Flow control") :]
    block = section.split("```python", 1)[1].split("```", 1)[0]
    namespace: dict[str, object] = {"__name__": "readme_flow_control"}
    exec(compile(block, "README.md#flow-control", "exec"), namespace)
    lookup = namespace["crm_lookup"]
    assert getattr(lookup, "concurrency", None) is not None
    assert getattr(lookup, "rate_limit", None) == "crm"
