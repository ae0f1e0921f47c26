"""The cyclic garbage collector, paused while flatjob builds a run's objects.

Reading, checking and compiling allocate hundreds of thousands of short-lived, acyclic
containers (a job's nodes, marks, findings) and keep every document until the end; each
full collection rescans all of it.  Reference counting still frees everything they drop.
Before it was paused for every entry point (hx34), lint spent two thirds of its CPU in the
collector on a large input: 200 000 YAML nodes took 1.6 s with it and 0.5 s without, and
compile (which paused it) refused the same run in a third of lint's time.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def no_cyclic_gc() -> Iterator[None]:
    """Pause the cyclic collector for the block (or the function it decorates), then restore it."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
