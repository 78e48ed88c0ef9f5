"""Flow control shared by every worker: concurrency limits, rate limits, named limits.

Example::

    import keepgoing
    from keepgoing import limits

    limits.define("crm", rate="20/s", burst=5)

    @keepgoing.task(rate_limit="crm", concurrency=keepgoing.Concurrency(2, key="customer_id"))
    def lookup_customer(customer_id: str) -> dict[str, str]: ...

A limit that cannot be enforced (``concurrency=0``, ``rate_limit="ten per second"``,
a key naming no argument) raises :class:`InvalidLimitError` when the decorator runs.
"""

from keepgoing._limits import Concurrency, RateLimit, define
from keepgoing.errors import InvalidLimitError

__all__ = ["Concurrency", "InvalidLimitError", "RateLimit", "define"]
