"""Checks for the Kubernetes string and integer formats that the API server enforces on decode.

Each entry of `FORMATS` maps a schema `format` to (accepts, describe): `accepts(value)` is
True for values of other JSON types, so a format never doubles a type error; `describe`
words the complaint. Formats not listed (double) add nothing to the type.
Used by checkers.py, and by the jsonschema oracle in the tests and the bench.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any

# resource.ParseQuantity: optional sign, digits with at most one '.' (at least one digit:
# ".", "+" and "e5" are ErrFormatWrong), then one suffix: a decimal SI or binary SI unit, or
# a decimal exponent (e/E and a signed integer that fits an int64: suffixHandler.interpret
# parses it with strconv.ParseInt(suffix[1:], 10, 64), and ErrSuffix fails the whole decode).
_QUANTITY = re.compile(r"([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))([numkMGTPE]|[KMGTPE]i|[eE][+-]?[0-9]+)?")
_SCALE = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
          "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": 1,
          "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
# Go's strings.TrimSpace, as applied by Quantity.UnmarshalJSON, for the Latin-1 range.
_GO_SPACE = " \t\n\v\f\r\x85\xa0"

# Go's time.RFC3339 layout as time.Parse reads it (upper-case T and Z only).
_DATE_TIME = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T([01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d+)?"
    r"(?:Z|[+-](?:[01]\d|2[0-3]):[0-5]\d)"
)
_DAYS_IN_MONTH = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)

# encoding/base64 StdEncoding as used for []byte fields; the decoder skips \r and \n.
_BASE64 = re.compile(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?")

_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)


def show(value: Any, limit: int = 40) -> str:
    """Return a short repr of a value for messages (never raises, even for huge integers)."""
    try:
        text = repr(value)
    except ValueError:  # int-to-str conversion limit
        return f"<{type(value).__name__} too large to show>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _is_exponent(suffix: str) -> bool:
    """Whether a suffix is a decimal exponent (`e3`, `E-3`), not the SI `E` or binary `Ei`."""
    return suffix[:1] in ("e", "E") and suffix not in ("E", "Ei")


def _exponent_fits(suffix: str) -> bool:
    """Whether a suffix is no decimal exponent, or one strconv.ParseInt(..., 10, 64) takes
    (suffixHandler.interpret); the digits are counted before int() converts them."""
    if not _is_exponent(suffix):
        return True
    digits = suffix[1:].lstrip("+-").lstrip("0")
    return len(digits) <= 19 and _INT64[0] <= int(suffix[1:]) <= _INT64[1]


def _quantity(value: str) -> re.Match[str] | None:
    """The parts of a quantity resource.ParseQuantity accepts (after Go's TrimSpace), else None."""
    m = _QUANTITY.fullmatch(value.strip(_GO_SPACE))
    return m if m is not None and _exponent_fits(m.group(2) or "") else None


def is_quantity(value: Any) -> bool:
    """Accept what resource.ParseQuantity accepts; numbers always pass."""
    if type(value) is not str:
        return True
    return _quantity(value) is not None


def quantity_value(value: Any) -> Decimal | None:
    """A quantity as a number (a JSON number, or a string is_quantity accepts); None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return Decimal(str(value))
    m = _quantity(value) if isinstance(value, str) else None
    if m is None:
        return None
    number, suffix = m.group(1), m.group(2) or ""
    try:  # `1e9999999` overflows the decimal context; an exponent of 5 000 digits is no int
        return Decimal(number) * (Decimal(10) ** int(suffix[1:]) if _is_exponent(suffix) else Decimal(_SCALE[suffix]))
    except (ArithmeticError, ValueError):
        return None


def is_date_time(value: Any) -> bool:
    """Accept an RFC 3339 timestamp with a real calendar date."""
    if type(value) is not str:
        return True
    match = _DATE_TIME.fullmatch(value)
    if match is None:
        return False
    year, month, day = (int(part) for part in match.groups()[:3])
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    return 1 <= month <= 12 and 1 <= day <= _DAYS_IN_MONTH[month - 1] - (
        month == 2 and not leap)


def is_base64(value: Any) -> bool:
    """Accept padded standard base64, ignoring line breaks as Go does."""
    if type(value) is not str:
        return True
    return _BASE64.fullmatch(value.replace("\n", "").replace("\r", "")) is not None


def _in_range(bounds: tuple[int, int]) -> Callable[[Any], bool]:
    """Build a check that an integer (or integral float) fits a Go integer type."""
    low, high = bounds

    def accepts(value: Any) -> bool:
        if type(value) is int or (type(value) is float and value.is_integer()):
            return low <= value <= high
        return True

    return accepts


FORMATS: dict[str, tuple[Callable[[Any], bool], Callable[[Any], str]]] = {
    "quantity": (is_quantity, lambda v: f"{show(v)} is not a valid quantity "
                                        "(e.g. '500m', '2Gi', '1.5')"),
    "date-time": (is_date_time, lambda v: f"{show(v)} is not an RFC 3339 date-time "
                                          "(e.g. '2025-01-31T12:00:00Z')"),
    "byte": (is_base64, lambda v: f"{show(v)} is not valid base64"),
    "int32": (_in_range(_INT32), lambda v: f"{show(v)} is out of range for int32"),
    # IntOrString keeps its integer in an int32.
    "int-or-string": (_in_range(_INT32), lambda v: f"{show(v)} is out of range for int32"),
    "int64": (_in_range(_INT64), lambda v: f"{show(v)} is out of range for int64"),
}
