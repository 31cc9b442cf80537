"""torch_npu's graph capture with graph memory pools: ``graph_pool_handle``,
``NPUGraph`` and the ``graph`` context manager, over CANN's capture
(``aclmdlRI*``) and ``aclallocMemPoolBeginAllocateToPool``.

While an :class:`NPUGraph` captures, a memory pool serves every allocation
of the default allocator on its capture stream, from any thread:
``caching_allocator_alloc(size, stream=g.capture_stream)`` and the
workspaces of launches on that stream. The pool is the graph's own unless
``capture_begin(pool=...)`` names another graph's pool or one from
:func:`graph_pool_handle`, so that several graphs share it (torch's rule:
replay such graphs in the order they were captured). The captured model
holds a use of the pool until :meth:`NPUGraph.reset`; once no graph and no
capture uses a pool, its free memory goes back to the device. The pools are
:class:`MemPool`\\ s: ``memory_stats()`` and ``memory_reserved()`` count them,
``memory_snapshot(g.pool())`` shows one.
"""

from __future__ import annotations

import contextlib
from ctypes import POINTER, byref, c_int32, c_uint64, c_void_p
from typing import Any, Dict, Iterator, Optional, Tuple

from .. import _stacks
from .._lib import c_error, declare, lib
from ..acl import mdl
from . import _default
from ._default import fail
from ._mempool import MemPool, _pool_of

__all__ = [
    "NPUGraph",
    "graph",
    "graph_pool_handle",
    "graph_pool_users",
    "is_current_stream_capturing",
]

declare(
    {
        "aclallocMemPoolBeginAllocateToPool": (c_error, (c_void_p, c_int32, c_void_p)),
        "aclallocMemPoolEndAllocateToPool": (c_error, (c_void_p, c_int32, c_void_p)),
        "aclallocMemPoolGraphCount": (c_error, (c_void_p, POINTER(c_uint64))),
    }
)

_MODES = {"global": 0, "thread_local": 1, "relaxed": 2}
"""torch's ``capture_error_mode`` names and CANN's aclmdlRICaptureMode."""

_HANDLE_POOLS: Dict[int, MemPool] = {}
"""Pools made by :func:`graph_pool_handle` and not yet captured with: from
their first capture on, the graphs that captured with one keep it (a pool
goes when the last of them does)."""


def _check(function: str, rc: int) -> None:
    if rc != 0:
        raise fail(function, rc)


def graph_pool_handle() -> Tuple[int, int]:
    """A new graph memory pool's id, for ``capture_begin(pool=...)`` or
    ``graph(g, pool=...)``: graphs captured with it share its memory."""
    pool = MemPool()
    _HANDLE_POOLS[pool.id[1]] = pool
    return pool.id


def graph_pool_users(pool: Any) -> int:
    """How many captured graphs hold memory of ``pool`` (a pool id or a
    :class:`MemPool`) now: an aclalloc extension
    (``aclallocMemPoolGraphCount``)."""
    count = c_uint64(0)
    _check(
        "aclallocMemPoolGraphCount",
        lib.aclallocMemPoolGraphCount(_mem_pool(pool)._handle, byref(count)),
    )
    return count.value


def _mem_pool(pool: Any) -> MemPool:
    if isinstance(pool, MemPool):
        return pool
    return _pool_of(pool)


def is_current_stream_capturing(stream: Optional[int] = None) -> bool:
    """Whether ``stream`` (None: the default stream, never capturing) is
    capturing now."""
    if stream is None:
        return False
    status, _, rc = mdl.ri_capture_get_info(stream)
    _check("aclmdlRICaptureGetInfo", rc)
    return status != mdl.ACL_MODEL_RI_CAPTURE_STATUS_NONE


class NPUGraph:
    """A captured graph, as torch_npu's ``NPUGraph``: ``capture_begin``,
    ``capture_end``, ``replay``, ``reset``, ``pool``. It captures on its own
    stream (``capture_stream``, made at the first capture) unless one is
    given."""

    def __init__(self) -> None:
        self._model = 0
        self._pool: Optional[MemPool] = None
        self._stream = 0
        self._own_stream = False
        self._capturing: Optional[Tuple[int, int]] = None  # (stream, device)

    @property
    def capture_stream(self) -> int:
        """The stream the graph captures on (0 before the first capture)."""
        return self._stream

    def pool(self) -> Tuple[int, int]:
        """The id of the graph's memory pool (``capture_begin(pool=...)``
        of another graph shares it)."""
        if self._pool is None:
            raise RuntimeError("The graph has no memory pool: it was never captured")
        return self._pool.id

    def capture_begin(
        self,
        pool: Any = None,
        capture_error_mode: str = "global",
        stream: Optional[int] = None,
    ) -> None:
        """Begins capturing the work queued on the capture stream, every
        allocation on it served by ``pool`` (a pool id, a :class:`MemPool`,
        or None: a new pool of this graph's)."""
        if self._model or self._capturing is not None:
            raise RuntimeError("The graph is captured already: reset() it first")
        mode = _MODES.get(capture_error_mode)
        if mode is None:
            raise ValueError(
                f"capture_error_mode must be one of {sorted(_MODES)}, not {capture_error_mode!r}"
            )
        chosen = MemPool() if pool is None else _mem_pool(pool)
        s = _default.stream_argument(stream)
        if s is None and not self._stream:
            made = c_void_p()
            _check("aclrtCreateStream", lib.aclrtCreateStream(byref(made)))
            self._stream, self._own_stream = made.value or 0, True
        elif s is not None:
            self._release_stream()
            self._stream = s
        device = _default.current_device(set_if_none=True)
        _check(
            "aclallocMemPoolBeginAllocateToPool",
            lib.aclallocMemPoolBeginAllocateToPool(chosen._handle, device, self._stream),
        )
        rc = _stacks.call(lib.aclmdlRICaptureBegin, self._stream, mode)
        if rc != 0:
            lib.aclallocMemPoolEndAllocateToPool(chosen._handle, device, self._stream)
            raise fail("aclmdlRICaptureBegin", rc)
        self._pool = chosen
        self._capturing = (self._stream, device)
        # The graph keeps the pool from now on.
        _HANDLE_POOLS.pop(chosen.id[1], None)

    def capture_end(self) -> None:
        """Ends the capture. A capture that failed leaves no graph, gives
        back the memory it took, and raises with CANN's reason."""
        if self._capturing is None:
            raise RuntimeError("The graph is not capturing: capture_begin() first")
        stream, device = self._capturing
        self._capturing = None
        model = c_void_p()
        rc = _stacks.call(lib.aclmdlRICaptureEnd, stream, byref(model))
        error = fail("aclmdlRICaptureEnd", rc) if rc != 0 else None
        assert self._pool is not None
        _check(
            "aclallocMemPoolEndAllocateToPool",
            lib.aclallocMemPoolEndAllocateToPool(self._pool._handle, device, stream),
        )
        if error is not None:
            raise error
        self._model = model.value or 0

    def replay(self, stream: Optional[int] = None) -> None:
        """Queues a replay on ``stream`` (None: the capture stream)."""
        if not self._model:
            raise RuntimeError("The graph was not captured (or was reset)")
        s = _default.stream_argument(stream) or self._stream
        _check("aclmdlRIExecuteAsync", _stacks.call(lib.aclmdlRIExecuteAsync, self._model, s))

    def reset(self) -> None:
        """Destroys the captured graph: the memory it holds goes back to its
        pool once its queued replays have run."""
        model, self._model = self._model, 0
        if model:
            _check("aclmdlRIDestroy", lib.aclmdlRIDestroy(model))

    def _release_stream(self) -> None:
        stream, self._stream = self._stream, 0
        if stream and self._own_stream:
            lib.aclrtDestroyStream(stream)
        self._own_stream = False

    def __del__(self) -> None:
        # At interpreter exit the library's module may be torn down first.
        with contextlib.suppress(Exception):
            if self._capturing is not None:
                self.capture_end()
        with contextlib.suppress(Exception):
            self.reset()
            self._release_stream()


@contextlib.contextmanager
def graph(
    npu_graph: NPUGraph,
    pool: Any = None,
    stream: Optional[int] = None,
    capture_error_mode: str = "global",
) -> Iterator[NPUGraph]:
    """Captures the work queued inside the block into ``npu_graph``, as
    torch_npu's ``torch.npu.graph``. An exception in the block abandons the
    capture (its memory goes back) and propagates."""
    npu_graph.capture_begin(pool=pool, capture_error_mode=capture_error_mode, stream=stream)
    try:
        yield npu_graph
    except BaseException:
        with contextlib.suppress(RuntimeError):
            npu_graph.capture_end()
        npu_graph.reset()
        raise
    npu_graph.capture_end()
