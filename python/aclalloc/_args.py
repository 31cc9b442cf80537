"""Argument checks shared by the pyACL-shaped functions.

pyACL's functions take plain ints and return codes; a bad argument here is
refused with ``ACL_ERROR_INVALID_PARAM`` and a message for
``acl.get_recent_err_msg()``, and never reaches C as something that could
crash it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional, Tuple

from . import _errors

U64_MAX = (1 << 64) - 1
I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1


class BadArgument(Exception):
    """An argument that cannot be passed to C; carries the message."""


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def handle(name: str, value: Any, *, none_ok: bool = False) -> Optional[int]:
    """A handle or address: an int from 0 to 2**64 - 1 (None: NULL, if allowed)."""
    if value is None and none_ok:
        return None
    if not _is_int(value) or not 0 <= value <= U64_MAX:
        raise BadArgument(
            f"The argument {name} is {value!r}: expected a handle, an int from 0 to {U64_MAX}."
        )
    return value


def size(name: str, value: Any) -> int:
    """A size_t."""
    if not _is_int(value) or not 0 <= value <= U64_MAX:
        raise BadArgument(
            f"The argument {name} is {value!r}: expected a size, an int from 0 to {U64_MAX}."
        )
    return value


def int32(name: str, value: Any) -> int:
    """An int32_t (device ids, enum values, memset's value)."""
    if not _is_int(value) or not I32_MIN <= value <= I32_MAX:
        raise BadArgument(
            f"The argument {name} is {value!r}: expected an int from {I32_MIN} to {I32_MAX}."
        )
    return value


def unsigned(name: str, value: Any, bits: int) -> int:
    """A ``uint{bits}_t``."""
    top = (1 << bits) - 1
    if not _is_int(value) or not 0 <= value <= top:
        raise BadArgument(f"The argument {name} is {value!r}: expected an int from 0 to {top}.")
    return value


def fields(name: str, value: Any, required: Tuple[str, ...], optional: Tuple[str, ...]) -> None:
    """``value`` is a dict (a C structure by its field names) with every key
    of ``required`` and no key outside ``required + optional``."""
    known = required + optional
    if not isinstance(value, Mapping):
        raise BadArgument(
            f"The argument {name} is {value!r}: expected a dict with the keys {list(known)}."
        )
    missing = [key for key in required if key not in value]
    unknown = [key for key in value if key not in known]
    if missing or unknown:
        raise BadArgument(
            f"The argument {name} has the keys {list(value)}: expected {list(required)}"
            + (f", optionally {list(optional)}" if optional else "")
            + "."
        )


def refuse(function: str, error: BadArgument) -> int:
    """Records the message and returns ``ACL_ERROR_INVALID_PARAM``."""
    _errors.record(function, str(error))
    return 100000
