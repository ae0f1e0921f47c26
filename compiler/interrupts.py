"""What counts as a Ctrl-C once it has become another exception (no side effects on import:
compiler/console.py, which installs the console scripts' SIGINT handlers, is not for importing)."""

from __future__ import annotations


def by_ctrl_c(exc: BaseException) -> bool:
    """Whether an exception is a Ctrl-C's: a KeyboardInterrupt, or one raised because of it
    (Python 3.11 wraps one raised in a class's __set_name__ as RuntimeError, "Error calling
    __set_name__": a dataclass defined by a lazy import said "internal error", exit 3)."""
    seen: set[int] = set()
    at: BaseException | None = exc
    while at is not None and id(at) not in seen:
        if isinstance(at, KeyboardInterrupt):
            return True
        seen.add(id(at))
        at = at.__cause__ or at.__context__
    return False
