"""Storage backends behind the ``Store`` Protocol (DESIGN §7)."""

from memstrata.store.base import Store

__all__ = ["Store"]
