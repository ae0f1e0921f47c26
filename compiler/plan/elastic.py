"""Elastic seats for the planner: compiler/seats.py (outside the planner, so the runtime may
count a job's pods without loading it)."""

from __future__ import annotations

from ..seats import allocation, seat_order

__all__ = ["allocation", "seat_order"]
