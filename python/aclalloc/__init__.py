"""aclalloc for Python: CANN's allocator API over the process's libaclalloc.

* :mod:`aclalloc.acl` -- pyACL's names and conventions (``acl.rt.malloc``,
  ``acl.rt.allocator_register``, ... returning ``ret`` or ``(value, ret)``).
* :mod:`aclalloc.npu` -- torch_npu's memory API (``memory_stats``,
  ``caching_allocator_alloc``, ``NPUPluggableAllocator``, ...), which raises.
* :func:`torch_npu_allocator` -- libaclalloc's caching pool as torch_npu's
  allocator, in one call.
* :func:`launch_kernel` -- an operator launch that takes its workspace from
  the stream's registered allocator (or the default one).

Everything goes through the C ABI of one ``libaclalloc.so`` (ctypes), so C
code in the same process shares the same descriptors, streams and pools.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from . import _callbacks
from ._args import BadArgument, handle, refuse, size
from ._lib import library_path
from ._torch_npu import torch_npu_allocator

__version__ = "0.1.0"
__all__ = ["__version__", "launch_kernel", "library_path", "torch_npu_allocator"]


def launch_kernel(
    stream: Optional[int], workspace_size: int, fn: Optional[Callable[[int, int], Any]] = None
) -> int:
    """``aclallocLaunchKernel``: takes a workspace of ``workspace_size`` bytes
    from the allocator registered for ``stream`` (0 or None: the current
    context's default stream; no registration: the default allocator) and
    enqueues ``fn(workspace_address, workspace_size)`` on the stream's worker
    thread. Returns ``ret``: ``ACL_ERROR_RT_MEMORY_ALLOCATION`` (207001) when
    the allocator gave nothing (nothing is enqueued then).

    An exception raised by ``fn`` is printed on stderr and kept for
    ``acl.get_recent_err_msg()``; the launch had already succeeded.
    """
    try:
        s = handle("stream", stream, none_ok=True) or 0
        n = size("workspace_size", workspace_size)
        if fn is not None and not callable(fn):
            raise BadArgument(f"The argument fn is {fn!r}: expected a callable or None.")
    except BadArgument as e:
        return refuse("aclalloc.launch_kernel", e)
    return _callbacks.launch(s, n, fn)
