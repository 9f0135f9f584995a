"""JavaScript number semantics the reference algorithm depends on.

The reference is written in TypeScript, so its results carry JavaScript's rules: ``Math.round`` rounds halves
towards +infinity, ``toFixed`` rounds the exact binary value half-up, ``Math.min``/``Math.max`` propagate NaN,
division by zero yields infinities or NaN, and every comparison with NaN is false. Python differs on each point
(``round`` is half-even, ``min`` depends on argument order, ``1 / 0`` raises), so scoring code calls these
helpers wherever the reference's numbers would otherwise drift.
"""

from __future__ import annotations

import math
from decimal import ROUND_HALF_UP, Decimal

Number = int | float

NAN = math.nan
INF = math.inf
# 2**52: from here on every double is an integer.
_INTEGRAL_FLOATS = 4503599627370496.0
# 2**53: past it not every integer is a double.
MAX_EXACT = 9007199254740992
# Largest array index of JavaScript, 2**32 - 2: such keys come first in an object's key order.
_MAX_ARRAY_INDEX = 4294967294
# Members every JavaScript object inherits. The reference looks method thresholds up by plain property
# access, so a method named like one of them finds the inherited member instead of the default threshold.
JS_INHERITED_MEMBERS = frozenset(
    {
        "__proto__",
        "__defineGetter__",
        "__defineSetter__",
        "__lookupGetter__",
        "__lookupSetter__",
        "constructor",
        "hasOwnProperty",
        "isPrototypeOf",
        "propertyIsEnumerable",
        "toLocaleString",
        "toString",
        "valueOf",
    }
)


def js_key_order(keys: list[str]) -> list[str]:
    """Keys in the order a JavaScript object lists them: array indices ("0", "7", "12") ascending first,
    then the other keys in insertion order.

    >>> js_key_order(["b", "10", "a", "2"])
    ['2', '10', 'b', 'a']
    """
    indices: list[tuple[int, str]] = []
    names: list[str] = []
    for key in keys:
        if (
            key.isdecimal()
            and key.isascii()
            and (key == "0" or key[0] != "0")
            and int(key) <= _MAX_ARRAY_INDEX
        ):
            indices.append((int(key), key))
        else:
            names.append(key)
    if not indices:
        return names
    indices.sort()
    return [key for _, key in indices] + names


def as_double(value: Number) -> Number:
    """The result of integer arithmetic as a JavaScript number holds it.

    Python's ints are exact; JavaScript rounds every sum and product to a double. The two agree up to 2**53,
    so an int result is kept (and stays an int) unless it is past that, where it becomes the nearest double:
    for one operation on two doubles that is exactly the double JavaScript computes. Counts a caller gives
    (claims, ranks, combined scores) reach these magnitudes.

    >>> as_double(2**53 + 1) == 2**53, as_double(7), as_double(-(10**400))
    (True, 7, -inf)
    """
    if type(value) is int and not -MAX_EXACT <= value <= MAX_EXACT:
        try:
            return float(value)
        except OverflowError:  # past the largest double JavaScript rounds to Infinity
            return INF if value > 0 else -INF
    return value


def js_round(value: Number) -> Number:
    """``Math.round``: nearest integer, halves towards +infinity; NaN and infinities pass through."""
    if type(value) is int:
        return value
    if not -_INTEGRAL_FLOATS < value < _INTEGRAL_FLOATS:
        # NaN, infinities, and doubles so large that they are integers already. Returned as the double, as
        # JavaScript holds it: an int here would make later sums exact where the reference's round.
        return value
    floor = math.floor(value)
    # Comparing the remainder (exact in binary) avoids the 0.49999999999999994 + 0.5 == 1.0 trap.
    return floor + 1 if value - floor >= 0.5 else floor


def round_to(value: Number, digits: int) -> float:
    """The reference's ``Math.round(value * 10**digits) / 10**digits``."""
    factor = _POWERS[digits]
    scaled: float = as_double(value * factor)
    try:
        floor = math.floor(scaled)
    except (ValueError, OverflowError):
        return scaled / factor
    return (floor + 1 if scaled - floor >= 0.5 else floor) / factor


_POWERS: tuple[int, ...] = tuple(10**digits for digits in range(16))


def to_fixed_number(value: Number, digits: int) -> float:
    """``Number(value.toFixed(digits))``: half-up rounding of the exact binary value."""
    if value != value or value in (INF, -INF):
        return float(value)
    # '%.*f' rounds the exact binary value correctly but half-to-even. The two differ only on exact ties,
    # which a double can hold only as an odd multiple of 2**-(digits + 1): those go through Decimal.
    scaled = value * (2 << digits)
    if not (scaled.is_integer() if isinstance(scaled, float) else True) or int(scaled) % 2 == 0:
        return float(f"{value:.{digits}f}")
    exact = Decimal(value)
    # toFixed formats |x| and prefixes the sign, so a tie rounds away from zero.
    rounded = exact.quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP)
    return float(rounded)


def to_fixed(value: Number, digits: int) -> str:
    """A number with ``digits`` decimals for explanations (free text, so plain Python rounding)."""
    if value != value:
        return "NaN"
    if value in (INF, -INF):
        return "Infinity" if value > 0 else "-Infinity"
    return f"{value:.{digits}f}"


def js_min(*values: Number) -> Number:
    """``Math.min``: NaN if any argument is NaN, +infinity for no arguments."""
    result: Number = INF
    for value in values:
        if value != value:
            return NAN
        if value < result:
            result = value
    return result


def js_max(*values: Number) -> Number:
    """``Math.max``: NaN if any argument is NaN, -infinity for no arguments."""
    result: Number = -INF
    for value in values:
        if value != value:
            return NAN
        if value > result:
            result = value
    return result


def clamp(value: Number, low: Number, high: Number) -> Number:
    """``Math.max(low, Math.min(high, value))`` with NaN passing through."""
    if value != value:
        return value
    if value > high:
        return high
    if value < low:
        return low
    return value


def js_div(numerator: Number, denominator: Number) -> float:
    """IEEE-754 division as JavaScript does it: x/0 is +-infinity, 0/0 is NaN."""
    if denominator == 0:
        if numerator == 0 or numerator != numerator:
            return NAN
        negative = (numerator < 0) != (math.copysign(1.0, denominator) < 0)
        return -INF if negative else INF
    return numerator / denominator


def is_integer(value: object) -> bool:
    """``Number.isInteger``."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, float) and math.isfinite(value) and value.is_integer()


def is_finite(value: object) -> bool:
    """``Number.isFinite`` (false for non-numbers)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, float) and math.isfinite(value)


def slice_end(end: Number, length: int) -> int:
    """The end index ``Array.prototype.slice(0, end)`` uses, as a Python slice bound."""
    if end != end:
        return 0
    if end == INF:
        return length
    if end == -INF:
        return 0
    return int(end)  # truncation towards zero, like ToIntegerOrInfinity


def js_str(value: object) -> str:
    """``String(value)`` for the numbers, booleans and strings that appear in explanations."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if value != value:
            return "NaN"
        if value in (INF, -INF):
            return "Infinity" if value > 0 else "-Infinity"
        return js_number(value)
    return str(value)


def js_number(value: float) -> str:
    """A finite ``value`` as ECMAScript's Number::toString writes it (``String(x)``, and ``JSON.stringify``'s
    number text).

    ``repr`` gives the same shortest round-trip digits; only their layout differs (JavaScript writes plain
    digits for exponents up to 21 and down to 1e-7, ``1e-9`` rather than ``1e-09``, never a ``.0``).
    """
    if value == 0:
        return "0"  # -0 too, as JavaScript writes it
    text = repr(value)
    if "e" not in text:
        # repr is plain for 1e-4 <= |x| < 1e16, inside JavaScript's plain range, with the same digits.
        return text[:-2] if text.endswith(".0") else text
    mantissa, _, exponent = text.partition("e")
    sign = ""
    if mantissa[0] == "-":
        sign, mantissa = "-", mantissa[1:]
    digits = mantissa.replace(".", "")
    k = len(digits)
    n = int(exponent) + 1  # the decimal point sits after n digits
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * -n + digits
    e = n - 1
    tail = f"e{'+' if e >= 0 else '-'}{abs(e)}"
    return sign + (digits if k == 1 else digits[0] + "." + digits[1:]) + tail
