"""Messages for ``acl.get_recent_err_msg()`` that the package itself produces.

Two sources besides the library's own per-thread log:

* argument checks in the pyACL-shaped functions (this thread's, like the
  library's messages);
* exceptions raised by Python callbacks (allocator callbacks, kernels). Those
  run on threads the caller does not own (a stream's worker, a runtime's
  executor), so they are kept process-wide: any thread's next
  ``get_recent_err_msg()`` returns them. Each is also printed on stderr with
  its traceback when it happens, so none is ever silently lost.
"""

from __future__ import annotations

import collections
import sys
import threading
import traceback

_local = threading.local()
_callback_messages: collections.deque[str] = collections.deque(maxlen=256)


def record(function: str, reason: str) -> None:
    """Keeps ``"<function> failed. <reason>"`` for this thread's next read."""
    messages = getattr(_local, "messages", None)
    if messages is None:
        messages = _local.messages = []
    messages.append(f"{function} failed. {reason}")


def record_callback_exception(what: str, exc: BaseException, consequence: str = "") -> None:
    """Reports an exception a Python callback raised: stderr (with the
    traceback) now, and the next ``get_recent_err_msg()`` of any thread."""
    text = f"{what} raised {type(exc).__name__}: {exc}"
    if consequence:
        text += f"; {consequence}"
    _callback_messages.append(text)
    try:
        print(f"aclalloc: {text}", file=sys.stderr)
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
    except Exception:  # stderr closed at exit: the message is still kept
        pass


def take_thread_messages() -> list[str]:
    """This thread's argument messages, newest first, cleared."""
    mine = getattr(_local, "messages", None) or []
    _local.messages = []
    return list(reversed(mine))


def take_callback_messages() -> list[str]:
    """The callbacks' messages (any thread), newest first, cleared."""
    taken: list[str] = []
    while True:
        try:
            taken.append(_callback_messages.popleft())
        except IndexError:
            break
    return list(reversed(taken))
