"""Python frames for the allocation stacks the library captures.

When stacks are wanted (``_record_memory_history(stacks=...)``, or tracking
with ``ACLALLOC_TRACK_STACKS`` set), calls that allocate hand the library the
caller's Python stack first (``aclallocSetPythonFrames``), innermost first,
the package's own frames left out; the stacks captured during the call end
with those frames, as PyTorch records them (``filename``, ``line``, ``name``).
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable, Optional

from ._lib import lib

_PACKAGE = os.path.dirname(os.path.abspath(__file__))
_MAX_FRAMES = 64

_history_wants = False
"""Set by ``_record_memory_history`` with a context."""


def _env_wants() -> bool:
    value = os.environ.get("ACLALLOC_TRACK_STACKS", "").strip().lower()
    return value not in ("", "0", "off", "no", "false")


_tracking_wants = _env_wants()


def want(on: bool) -> None:
    """Whether the pool's history records stacks (Python frames are then sent)."""
    global _history_wants
    _history_wants = on


def _frames_text() -> Optional[bytes]:
    frame: Any = sys._getframe(2)
    lines = []
    while frame is not None and len(lines) < _MAX_FRAMES:
        code = frame.f_code
        if not code.co_filename.startswith(_PACKAGE):
            lines.append(f"{code.co_filename}\t{frame.f_lineno}\t{code.co_name}")
        frame = frame.f_back
    return "\n".join(lines).encode("utf-8", "replace") if lines else None


def call(c_function: Callable[..., int], *args: Any) -> int:
    """``c_function(*args)``, with the caller's Python frames set for it when
    stacks are wanted."""
    if not (_history_wants or _tracking_wants):
        return c_function(*args)
    lib.aclallocSetPythonFrames(_frames_text())
    try:
        return c_function(*args)
    finally:
        lib.aclallocSetPythonFrames(None)
