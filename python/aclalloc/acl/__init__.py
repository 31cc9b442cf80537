"""pyACL's names and conventions over libaclalloc: ``from aclalloc import acl``.

As in pyACL, handles (contexts, streams, descriptors, device pointers) are
ints and every function returns ``ret`` (0 on success) or ``(value..., ret)``.
A bad argument (wrong type, negative size, out of range) returns
``ACL_ERROR_INVALID_PARAM`` (100000) with a message for
:func:`get_recent_err_msg`; handles that are ints but not live are refused by
the library the same way. Nothing here raises for a failed call.
"""

from __future__ import annotations

from typing import Optional

from .. import _errors
from .._lib import lib, recent_c_message, take_carried_messages
from . import mdl, rt

__all__ = ["finalize", "get_recent_err_msg", "init", "mdl", "rt"]


def init(config_path: Optional[str] = None) -> int:
    """``aclInit``: initialises the runtime; ``config_path`` may be None or ""
    (an unreadable file: ``ACL_ERROR_INVALID_FILE``). Returns ``ret``."""
    if config_path is not None and not isinstance(config_path, str):
        _errors.record("acl.init", f"The argument config_path is {config_path!r}: expected str.")
        return 100000
    return lib.aclInit(None if config_path is None else config_path.encode())


def finalize() -> int:
    """``aclFinalize``: releases every context and stream (pending work runs
    first). Returns ``ret``."""
    rc = lib.aclFinalize()
    from .. import _callbacks

    _callbacks.prune()
    return rc


def get_recent_err_msg() -> Optional[str]:
    """The messages of this thread's failed calls since the last read, newest
    first, one per line, then cleared; None when nothing failed.

    It joins this package's messages (bad arguments, exceptions raised by
    Python callbacks on any thread) with ``aclGetRecentErrMsg()``'s.
    """
    messages = _errors.take_thread_messages()
    c_text = recent_c_message()
    if c_text:
        messages.append(c_text)
    messages += take_carried_messages()
    # A callback's exception comes before the failure it caused.
    messages += _errors.take_callback_messages()
    return "\n".join(messages) if messages else None
