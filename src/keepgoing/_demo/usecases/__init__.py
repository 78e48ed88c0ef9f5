"""The use cases the demo offers, in the order its page lists them."""

from __future__ import annotations

from keepgoing._demo.usecases.base import DemoStack, Evidence, UseCase
from keepgoing._demo.usecases.billing import BILLING
from keepgoing._demo.usecases.crm import CRM
from keepgoing._demo.usecases.holdback import HOLDBACK
from keepgoing._demo.usecases.reconciliation import RECONCILIATION

USE_CASES: tuple[UseCase, ...] = (BILLING, CRM, RECONCILIATION, HOLDBACK)

__all__ = ["USE_CASES", "DemoStack", "Evidence", "UseCase"]
