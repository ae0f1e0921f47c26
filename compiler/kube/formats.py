"""Checks for the Kubernetes string and integer formats that the API server enforces on decode.

Each entry of `FORMATS` maps a schema `format` to (accepts, describe): `accepts(value)` is
True for values of other JSON types, so a format never doubles a type error; `describe`
words the complaint. Formats not listed (double) add nothing to the type.
Used by checkers.py, and by the jsonschema oracle in the tests and the bench.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from decimal import MAX_EMAX, MAX_PREC, MIN_EMIN, ROUND_UP, Context, Decimal
from typing import Any

# resource.ParseQuantity: optional sign, digits with at most one '.' (none at all is 0: ".",
# "m", "Ki" and "e3" decode to 0, apimachinery's quantity_decode_corpus.json), then one suffix:
# a decimal SI or binary SI unit, or a decimal exponent (e/E and a signed integer that fits an
# int64: suffixHandler.interpret parses it with strconv.ParseInt(suffix[1:], 10, 64), and
# ErrSuffix fails the whole decode).
_QUANTITY = re.compile(r"([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]*)?)([numkMGTPE]|[KMGTPE]i|[eE][+-]?[0-9]+)?")
# An exponent beyond this, after Go's int32 wrap, is refused: the API server decodes some such
# quantities to other numbers (1.5e-2147483648 is 1.5e2147483647) and never returns on others
# (1e-2147483648; the decode corpus marks them "hang"); no quantity anyone writes comes near.
EXPONENT_BOUND = 10**6
# suffixHandler.interpret: a decimal SI suffix -> its power of ten, a binary one -> its power of two
_DECIMAL_SI = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_SI = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
# Exact arithmetic on any quantity text: Go's inf.Dec has no exponent bound (only exact ops use it).
_EXACT = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN)
_NANO = Decimal("1e-9")
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


def _exponent(suffix: str) -> int | None:
    """The int64 strconv.ParseInt(suffix[1:], 10, 64) reads (suffixHandler.interpret), or None
    where it fails; leading zeros are dropped first, so a long run of them is no ValueError."""
    digits = suffix[1:].lstrip("+-").lstrip("0") or "0"
    number = int(digits) * (-1 if suffix[1:2] == "-" else 1) if len(digits) <= 19 else None
    return number if number is not None and _INT64[0] <= number <= _INT64[1] else None


def _exponent_fits(suffix: str) -> bool:
    """Whether a suffix is no decimal exponent, or one strconv.ParseInt(..., 10, 64) takes and
    the API server decodes in bounded time (EXPONENT_BOUND)."""
    if not _is_exponent(suffix):
        return True
    exponent = _exponent(suffix)
    return exponent is not None and abs(_go_int32(exponent)) <= EXPONENT_BOUND


def _quantity(value: str) -> re.Match[str] | None:
    """The parts of a quantity resource.ParseQuantity accepts (after Go's TrimSpace), else None."""
    text = value.strip(_GO_SPACE)
    m = _QUANTITY.fullmatch(text) if text else None  # "" is ErrFormatWrong
    return m if m is not None and _exponent_fits(m.group(2) or "") else None


def is_quantity(value: Any) -> bool:
    """Accept what resource.ParseQuantity accepts; numbers always pass."""
    if type(value) is not str:
        return True
    return _parse(value) is not None  # the pattern, and what decodes (a 19-digit overflow of the fast path is ErrNumeric)


def _go_int32(number: int) -> int:
    """Go's int32(x) of an int64: the low 32 bits, signed (suffixHandler.interpret's exponent)."""
    return (number + 2**31) % 2**32 - 2**31


def _parse(text: str) -> tuple[Decimal, str, bool] | None:
    """What resource.ParseQuantity makes of a quantity text: its exact value, its Format, and
    whether the int64 fast path keeps the text as String(); None where it fails.  The Decimal
    may lie beyond the default context: compare it, do not compute with it."""
    match = _quantity(text)
    if match is None:
        return None
    number, suffix = match.group(1), match.group(2) or ""
    whole, _, denom = number.lstrip("+-").partition(".")
    num = whole.lstrip("0") or "0"  # parseQuantityString strips leading zeros
    if suffix in _BINARY_SI:
        fmt, exponent = "BinarySI", _BINARY_SI[suffix]
        precision = -1 if denom else 15 - len(num) - exponent * 3 // 10 - 1
        scale, mantissa = 0, 2**exponent
    else:  # int32(parsed): 1e4294967296 is 1e0 to the API server
        fmt, exponent = ("DecimalExponent", _go_int32(_exponent(suffix) or 0)) if _is_exponent(suffix) else ("DecimalSI", _DECIMAL_SI[suffix])
        precision, scale, mantissa = 19 - len(num + denom), exponent, 1  # maxInt64Factors
    scale -= len(denom)
    shifted = num + denom
    if precision >= 0 and scale >= -9:  # the int64 fast path
        if int(shifted) >= 2**63:  # strconv.ParseInt fails: ErrNumeric
            return None
        if int(shifted) * mantissa < 2**63:  # else int64Multiply overflows: the inf.Dec path
            value = Decimal(f"{'-' if number[:1] == '-' else ''}{int(shifted) * mantissa}e{scale}")
            if fmt == "BinarySI":
                return value, fmt, int(shifted) & 7 != 0
            return value, fmt, scale % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0"
    if not any(c.isdigit() for c in number):  # no digit: 0 on the fast path only
        return None
    value = Decimal(number)
    if fmt == "BinarySI":
        value = _EXACT.multiply(value, 2**exponent)
    else:
        sign, digits, exp = value.as_tuple()
        value = Decimal((sign, digits, int(exp) + exponent))
    if value and int(value.as_tuple().exponent) < -9:  # rounded up (away from 0) to 1n
        value = value.quantize(_NANO, rounding=ROUND_UP, context=_EXACT)
    if fmt == "BinarySI" and abs(value) >= 2**63:  # capped at maxAllowed
        value = Decimal(2**63 - 1).copy_sign(value)
    if fmt == "BinarySI" and 0 < abs(value) < 1:
        fmt = "DecimalSI"
    return value, fmt, False


def _json_number(value: Any) -> str | None:
    """The text a JSON number reaches ParseQuantity as: encoding/json's float64 form (a
    YAML-to-JSON client), e.g. 1e18 as "1000000000000000000"; None for bools and NaN/inf."""
    if type(value) is int:
        return str(value) if abs(value) < 10**4000 else None  # Python's int-to-str limit
    if type(value) is not float or not math.isfinite(value):
        return None
    if value == 0 or 1e-6 <= abs(value) < 1e21:  # strconv 'f', shortest digits
        return format(Decimal(repr(value)).normalize(), "f")
    return repr(value).replace("e-0", "e-")  # 'e' form; encoding/json writes e-7, not e-07


def quantity_value(value: Any) -> Decimal | None:
    """A quantity as the API server's exact number (below 1n rounded up, BinarySI capped at
    int64), or None where ParseQuantity fails on it (or its JSON number's text).  It may lie beyond the
    default Decimal context (1e2147483647): compare it rather than compute with it."""
    text = value if isinstance(value, str) else _json_number(value)
    parsed = _parse(text) if text is not None else None
    return parsed[0] if parsed is not None else None


def _canonical(value: Decimal, fmt: str) -> str:
    """Quantity.CanonicalizeBytes: BinarySI as n*1024^k (below 1024 or fractional, DecimalSI); else
    the digits without trailing zeros, the exponent floored to a multiple of 3, and its suffix
    (a DecimalSI exponent with none, e.g. 1000E's 21, prints no suffix at all, as Go does)."""
    if not value:
        return "0"
    if fmt == "BinarySI" and abs(value) >= 1024 and value == value.to_integral_value():
        whole, power = abs(int(value)), 0
        while whole % 1024 == 0:
            whole, power = whole // 1024, power + 10
        suffix = next((s for s, p in _BINARY_SI.items() if p == power), "")
        return f"{'-' if value < 0 else ''}{whole}{suffix}"
    sign, digits, exp = value.as_tuple()
    text = "".join(map(str, digits))
    exp = int(exp) + len(text) - len(text.rstrip("0"))
    text = text.rstrip("0") + "0" * (exp % 3)
    exp -= exp % 3
    if fmt == "DecimalExponent":
        suffix = f"e{exp}" if exp else ""
    else:
        suffix = next((s for s, p in _DECIMAL_SI.items() if p == exp), "")
    return f"{'-' if sign else ''}{text}{suffix}"


def quantity_string(value: Any) -> str | None:
    """Quantity.String() of what the API server decodes (a quantity text or a JSON number): the
    text itself when ParseQuantity's fast path keeps it ("+1", "01", "1e0"), else the canonical
    form; None where ParseQuantity fails.  validateContainerResourceDivisor compares this."""
    text = value.strip(_GO_SPACE) if isinstance(value, str) else _json_number(value)
    parsed = _parse(text) if text is not None else None
    if parsed is None:
        return None
    number, fmt, kept = parsed
    return text if kept or text == "0" else _canonical(number, fmt)


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
