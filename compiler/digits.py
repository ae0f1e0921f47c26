"""Numbers spelt in a job's text (a port, a count): ASCII digits within a bound, else None.

`str.isdigit` admits "²" and "٣", which `int()` refuses or reads, and `int()` refuses more
than 4 300 digits: the compiler and run-local read a number from a job's text only through
`bounded`, so a value they cannot use is a diagnostic or a default, never an internal error
(issue 21: MASTER_PORT "²" or 4 400 digits ended run-local, and lint of a PyTorch job, in exit 3).
"""

from __future__ import annotations

import re

INT32_MAX = 2**31 - 1  # a replica count
INT64_MAX = 2**63 - 1  # what the kubelet's downward API can give (strconv.FormatInt of an int64)
PORTS = (1, 65535)
_DIGITS = re.compile(r"[0-9]+")  # ASCII only: re's \d matches every Unicode decimal digit


def bounded(text: object, low: int, high: int) -> int | None:
    """The integer `text` spells in ASCII digits, if it lies in low..high; else None."""
    if not isinstance(text, str) or _DIGITS.fullmatch(text) is None:
        return None
    digits = text.lstrip("0") or "0"
    if len(digits) > len(str(high)):  # before int(): no conversion of thousands of digits
        return None
    value = int(digits)
    return value if low <= value <= high else None


def port(text: object) -> int | None:
    """A TCP port (1..65535) spelt in ASCII digits, else None."""
    return bounded(text, *PORTS)
