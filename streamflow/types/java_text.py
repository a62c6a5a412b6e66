"""What the JVM's ``toString`` gives for the Java object PyFlink makes of a Python value.

PyFlink's ``print()`` of a typed stream prints the JVM's text of each record, not
Python's ``str``; :meth:`TypeInformation.format <streamflow.types.typeinfo.TypeInformation.format>`
uses these rules. Ported from the Java ``toString`` of ``Tuple`` (``(a,b)``), ``Row``
(``+I[a, b]``), ``List`` (``[a, b]``), ``Map`` (``{k=v}``), ``Boolean``
(``true``), ``Double`` / ``Float`` (``1.0E10``, ``NaN``, ``Infinity``; a ``Float`` is
the shortest decimal that reads back as the same 32-bit float), ``BigDecimal``
(``1E+3``), ``byte[]`` in a ``Row`` or ``Tuple`` (``[102, -1]``: Java's bytes are signed) and
``java.sql.Date`` / ``Time`` / ``Timestamp``; ``None`` is ``null``.
"""

from __future__ import annotations

import datetime
import decimal
import struct
from typing import Any

from .row import Row

__all__ = ["F32", "java_float", "java_string"]

F32 = struct.Struct(">f")  # a Java float: 32 bits, big-endian


def java_string(value: Any) -> str:
    """``String.valueOf`` of the Java object PyFlink would make of ``value``."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return value
    if isinstance(value, float):
        return _java_double(value)
    if isinstance(value, decimal.Decimal):
        return _java_decimal(value)
    if isinstance(value, (datetime.date, datetime.time)):
        return _java_temporal(value)
    if isinstance(value, Row):
        return f"{value.get_row_kind()}[" + ", ".join(java_string(v) for v in value) + "]"
    if isinstance(value, tuple):
        return "(" + ",".join(java_string(v) for v in value) + ")"
    if isinstance(value, list):
        return "[" + ", ".join(java_string(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{java_string(k)}={java_string(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (bytes, bytearray)):  # a Java byte[] in a Row/Tuple: signed bytes
        return "[" + ", ".join(str(b - 256 if b > 127 else b) for b in value) + "]"
    return str(value)


def _java_temporal(value: datetime.date | datetime.time) -> str:
    """``java.sql.Date``/``Time``/``Timestamp.toString``: a timestamp shows its fraction of a
    second without trailing zeros (at least one digit); a time shows none."""
    if isinstance(value, datetime.datetime):
        fraction = f"{value.microsecond:06d}".rstrip("0") or "0"
        return value.strftime("%Y-%m-%d %H:%M:%S") + "." + fraction
    if isinstance(value, datetime.time):
        return value.strftime("%H:%M:%S")
    return value.isoformat()


def _java_double(value: float) -> str:
    """Java's ``Double.toString``: plain decimals for magnitudes in [10^-3, 10^7), else
    ``d.dddE<n>`` (``1.0E7``, ``1.0E-4``, ``1.0E20``), the shortest digits that read back."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    magnitude = abs(value)
    if value == 0 or 1e-3 <= magnitude < 1e7:
        return repr(value)  # positional in this range, with ".0" when whole (and "-0.0")
    number = decimal.Decimal(repr(magnitude)).as_tuple()
    digits = "".join(map(str, number.digits)).rstrip("0") or "0"
    exponent = len(number.digits) + int(number.exponent) - 1
    sign = "-" if value < 0 else ""
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exponent}"


def java_float(value: float) -> str:
    """Java's ``Float.toString``: the shortest decimal that reads back as the same 32-bit float."""
    if value != value or value in (float("inf"), float("-inf")):
        return _java_double(value)
    f = F32.unpack(F32.pack(value))[0]
    for digits in range(1, 10):
        text = f"{f:.{digits}g}"
        if F32.unpack(F32.pack(float(text)))[0] == f:
            break
    return _java_double(float(text))


def _java_decimal(value: decimal.Decimal) -> str:
    text = str(value)
    return text.replace("e", "E").replace("E+", "E+") if "E" in text.upper() else text
