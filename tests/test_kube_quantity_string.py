"""quantity_string: what Quantity.String() returns for a quantity the API server decodes.

validateContainerResourceDivisor compares that string with fixed sets, so the text ParseQuantity
keeps (its int64 fast path, when the text is already canonical-looking) matters as much as the
canonical form CanonicalizeBytes prints otherwise (review of round 8 #4).
"""

from __future__ import annotations

from typing import Any

import pytest

from flatjob.compiler.kube.formats import quantity_string

CASES: list[tuple[Any, str | None]] = [
    ("1", "1"), ("1k", "1k"), ("1m", "1m"), ("1M", "1M"), ("1Mi", "1Mi"), ("1Ki", "1Ki"),
    ("1000", "1k"),            # ends in 000: not kept, canonical
    ("1024", "1024"),          # kept: DecimalSI, no trailing 000
    ("1e3", "1e3"), ("1e0", "1e0"), ("+1", "+1"), ("01", "01"),  # kept as written
    ("1024Ki", "1Mi"),         # BinarySI value & 7 == 0: canonical, base 1024
    ("+1Ki", "+1Ki"),          # BinarySI value & 7 != 0: kept
    ("+1Pi", "1Pi"),           # precision < 0: the inf.Dec path, canonical
    ("976.5625Ki", "1000000"),  # BinarySI, no power of 1024: plain digits
    ("0.9765625Ki", "1k"),     # BinarySI below 1024 prints as DecimalSI
    ("0.001", "1m"), ("1.5", "1500m"), ("1000m", "1"), ("1.000", "1"),
    ("1.5Gi", "1536Mi"), ("8Ki", "8Ki"), ("1000Ki", "1000Ki"),
    ("1e-10", "1e-9"),         # below 1n rounded up, DecimalExponent kept
    ("1e4294967296", "1e4294967296"),  # int32(parsed) is 0, kept as written
    ("1000E", "1"),            # 1e21: DecimalSI has no suffix for it, Go prints none
    ("0", "0"), ("0.0", "0"), (" 1Ki ", "1Ki"),
    ("9999999999999999999", None),  # 19 digits past int64: strconv.ParseInt fails (ErrNumeric)
    ("1.5.5", None),
    (1024, "1024"), (1, "1"),  # YAML ints reach ParseQuantity as JSON numbers
    (1.0, "1"), (1000.0, "1k"), (0.001, "1m"), (1e18, "1E"),  # encoding/json's float form
    (1e-7, "100e-9"),          # encoding/json writes 1e-7: DecimalExponent, exponent floored to -9
    (True, None), (float("nan"), None),
]


@pytest.mark.parametrize(("value", "expected"), CASES, ids=[repr(c[0]) for c in CASES])
def test_quantity_string_is_what_the_api_server_prints(value: Any, expected: str | None) -> None:
    assert quantity_string(value) == expected
