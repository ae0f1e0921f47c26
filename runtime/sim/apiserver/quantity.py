"""Kubernetes resource quantities: parse, add, compare and print them as kube-apiserver does.

k8s.io/apimachinery/pkg/api/resource/quantity.go: a quantity is a number with a suffix in one of
three formats (DecimalSI `500m`/`1k`, BinarySI `1Gi`, DecimalExponent `1e3`), held to nano
precision (rounded up).  Its canonical form, which is what the API server stores and returns,
is CanonicalizeBytes: the format of the input, the largest exact suffix, and BinarySI values
below 1024 or not integral printed as DecimalSI.  So `1.0` comes back as `1`, `0.5` as `500m`,
`1024Mi` as `1Gi` and `1536Mi` stays `1536Mi`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

DECIMAL_SI, BINARY_SI, DECIMAL_EXPONENT = "DecimalSI", "BinarySI", "DecimalExponent"

_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_SUFFIX = {v: k for k, v in _DECIMAL.items()}
_BINARY_SUFFIX = {v // 10: k for k, v in _BINARY.items()}
_SHAPE = re.compile(r"([+-]?)(\d*)(?:\.(\d*))?(.*)")
_NANO = Fraction(1, 10**9)


class QuantityError(ValueError):
    """Not a quantity: the API answers `quantities must match the regular expression ...`."""


@dataclass(frozen=True)
class Quantity:
    """An exact value (a Fraction at nano precision) and the format it prints in."""

    value: Fraction
    format: str = DECIMAL_SI

    def __add__(self, other: Quantity) -> Quantity:
        return Quantity(self.value + other.value, self.format)  # Add keeps the receiver's format

    def __sub__(self, other: Quantity) -> Quantity:
        return Quantity(self.value - other.value, self.format)

    def __str__(self) -> str:
        return canonical(self)


MESSAGE = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"


def parse(text: object) -> Quantity:
    """resource.ParseQuantity (JSON numbers are read from their text, as UnmarshalJSON does)."""
    if isinstance(text, bool) or not isinstance(text, (str, int, float)):
        raise QuantityError(MESSAGE)
    raw = str(text).strip() if not isinstance(text, float) else repr(text)
    m = _SHAPE.fullmatch(raw)
    if not raw or m is None or (not m.group(2) and not m.group(3)):
        raise QuantityError(MESSAGE)
    sign, whole, frac, suffix = m.groups()
    number = Fraction(int(whole or "0")) + (Fraction(int(frac), 10 ** len(frac)) if frac else 0)
    if suffix in _BINARY:
        value, fmt = number * 2 ** _BINARY[suffix], BINARY_SI
    elif suffix in _DECIMAL:
        value, fmt = number * Fraction(10) ** _DECIMAL[suffix], DECIMAL_SI
    elif suffix[:1] in ("e", "E") and re.fullmatch(r"[+-]?\d+", suffix[1:]):
        value, fmt = number * Fraction(10) ** int(suffix[1:]), DECIMAL_EXPONENT
    else:
        raise QuantityError(MESSAGE)
    if sign == "-":
        value = -value
    return Quantity(_round_nano(value), fmt)


def _round_nano(value: Fraction) -> Fraction:
    """Below nano precision a quantity rounds up, away from zero (inf.RoundUp)."""
    scaled = value / _NANO
    if scaled.denominator == 1:
        return value
    whole = -(-abs(scaled.numerator) // scaled.denominator)
    return Fraction(whole if value > 0 else -whole) * _NANO


def canonical(q: Quantity) -> str:
    """Quantity.String() (CanonicalizeBytes)."""
    if q.value == 0:
        return "0"
    fmt = q.format
    if fmt == BINARY_SI and (abs(q.value) < 1024 or q.value.denominator != 1):
        fmt = DECIMAL_SI
    if fmt == BINARY_SI:
        number, power = int(q.value), 0
        while number % 1024 == 0 and power < 6:
            number, power = number // 1024, power + 1
        return f"{number}{_BINARY_SUFFIX.get(power, '')}"
    mantissa, exponent = int(q.value / _NANO), -9
    while mantissa % 10 == 0:
        mantissa, exponent = mantissa // 10, exponent + 1
    shift = exponent % 3  # floor the exponent to a multiple of 3
    mantissa, exponent = mantissa * 10**shift, exponent - shift
    if fmt == DECIMAL_SI and exponent in _DECIMAL_SUFFIX:
        return f"{mantissa}{_DECIMAL_SUFFIX[exponent]}"
    return f"{mantissa}" if exponent == 0 else f"{mantissa}e{exponent}"


def canonical_text(text: object) -> str:
    """The text a quantity is stored as: `1.0` -> `1`, `0.5` -> `500m`."""
    return canonical(parse(text))


def total(quantities: list[Quantity]) -> Quantity | None:
    """The sum (format of the first), or None for an empty list."""
    out: Quantity | None = None
    for q in quantities:
        out = q if out is None else out + q
    return out
