"""Prices per model, in US dollars per million tokens, so cost is computed, not guessed.

These defaults are list prices of common models; a price in the configuration
(``[gateway.prices]`` or a model's ``price``) wins. A model with no price
costs 0, which ``keepgoing gateway models`` shows.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_PRICES", "Price"]


@dataclass(frozen=True)
class Price:
    """US dollars per million input and output tokens."""

    input: float
    output: float

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input + output_tokens * self.output) / 1_000_000


DEFAULT_PRICES: dict[str, Price] = {
    "gpt-4o": Price(2.50, 10.00),
    "gpt-4o-mini": Price(0.15, 0.60),
    "gpt-4.1": Price(2.00, 8.00),
    "gpt-4.1-mini": Price(0.40, 1.60),
    "gpt-4.1-nano": Price(0.10, 0.40),
    "o3-mini": Price(1.10, 4.40),
    "text-embedding-3-small": Price(0.02, 0.0),
    "text-embedding-3-large": Price(0.13, 0.0),
    "claude-3-5-haiku-latest": Price(0.80, 4.00),
    "claude-3-5-sonnet-latest": Price(3.00, 15.00),
    "claude-sonnet-4-0": Price(3.00, 15.00),
    "claude-opus-4-0": Price(15.00, 75.00),
}
