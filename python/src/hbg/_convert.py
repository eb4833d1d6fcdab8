"""Python numbers to the C fields they go to, checked, never truncated.

The rules, the same in both backends (hbg._native implements them in C):

- a scalar (task scalars, graph boundary scalars, variant values) is an
  int or a float: an int in the u64 range as itself, a negative one down
  to -2**63 as its i64 two's complement; a float (or anything with
  ``__float__`` but no ``__index__``, such as numpy.float32) as the bits
  of the nearest f32, which must be finite unless the float is (inf and
  nan pass as themselves);
- a key is an int, same range as an integer scalar;
- a kernel id or a task id is an int in 0 .. 2**32-1.

Out of range: OutOfRangeError (an ArgumentError and an OverflowError),
naming the argument. Another type: TypeError, naming it too.
"""
from __future__ import annotations

import operator
import struct
from typing import Any, Optional

from ._errors import out_of_range

U64 = 1 << 64
I64_MIN = -(1 << 63)
U32 = 1 << 32
_F32 = struct.Struct("<f")
_U32 = struct.Struct("<I")


def _as_int(x: Any) -> Optional[int]:
    if x.__class__ is int:
        return x
    if isinstance(x, float):
        return None
    try:
        return operator.index(x)
    except TypeError:
        return None


def _int_bits(i: int, what: str, value: Any) -> int:
    if 0 <= i < U64:
        return i
    if I64_MIN <= i < 0:
        return i + U64
    raise out_of_range(what, value, "an integer scalar is a u64 or an "
                       "i64: -2**63 .. 2**64-1")


def f32_bits(x: Any, what: str) -> int:
    """The bits of the f32 nearest to float x (finite x must stay finite)."""
    f = float(x)
    try:
        return _U32.unpack(_F32.pack(f))[0]
    except OverflowError:
        raise out_of_range(what, x, "beyond the f32 range, +-3.4028235e38"
                           ) from None


def scalar_bits(x: Any, what: str) -> int:
    """The u64 a scalar argument carries (see the module's rules)."""
    if x.__class__ is int and 0 <= x < U64:
        return x
    i = _as_int(x)
    if i is not None:
        return _int_bits(i, what, x)
    if isinstance(x, float) or hasattr(type(x), "__float__"):
        return f32_bits(x, what)
    raise TypeError("%s: a scalar is an int or a float, not %s" % (
        what, type(x).__name__))


def int_bits(x: Any, what: str) -> int:
    """A key: an int in -2**63 .. 2**64-1 as its u64 bits."""
    i = _as_int(x)
    if i is None:
        raise TypeError("%s: expected an int, not %s" % (
            what, type(x).__name__))
    return _int_bits(i, what, x)


def int_index(x: Any, what: str) -> int:
    """An int argument (or anything with __index__), unchecked range."""
    i = _as_int(x)
    if i is None:
        raise TypeError("%s: expected an int, not %s" % (
            what, type(x).__name__))
    return i


def u32(x: Any, what: str) -> int:
    """A kernel or task id: an int in 0 .. 2**32-1."""
    i = _as_int(x)
    if i is None:
        raise TypeError("%s: expected an int, not %s" % (
            what, type(x).__name__))
    if not 0 <= i < U32:
        raise out_of_range(what, x, "0 .. 2**32-1")
    return i
