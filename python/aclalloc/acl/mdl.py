"""``acl.mdl``: graph capture and replay (CANN's ``aclmdlRI*`` functions).

pyACL's API reference documents no Python binding of the model running
instance functions; the names follow its convention for the others: the C
name in snake case without ``acl`` and the module's prefix
(``aclmdlRICaptureBegin`` is ``acl.mdl.ri_capture_begin``), inputs in C's
order, outputs returned before ``ret``, ints for handles. Bad arguments are
refused with ``ACL_ERROR_INVALID_PARAM`` and a message, never an exception.

A capture records the work queued on a stream between
:func:`ri_capture_begin` and :func:`ri_capture_end` into a model, which
:func:`ri_execute_async` replays; see docs/HOST_RUNTIME.md, "Graph capture".
"""

from __future__ import annotations

from ctypes import POINTER, byref, c_int, c_int32, c_uint32, c_void_p
from typing import Tuple

from .. import _stacks
from .._args import BadArgument, handle, int32, refuse
from .._lib import c_error, declare, lib

__all__ = [
    "ri_abort",
    "ri_capture_begin",
    "ri_capture_end",
    "ri_capture_get_info",
    "ri_capture_task_grp_begin",
    "ri_capture_task_grp_end",
    "ri_capture_task_update_begin",
    "ri_capture_task_update_end",
    "ri_capture_thread_exchange_mode",
    "ri_destroy",
    "ri_execute",
    "ri_execute_async",
    "ri_get_id",
]

# aclmdlRICaptureMode and aclmdlRICaptureStatus.
ACL_MODEL_RI_CAPTURE_MODE_GLOBAL = 0
ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL = 1
ACL_MODEL_RI_CAPTURE_MODE_RELAXED = 2
ACL_MODEL_RI_CAPTURE_STATUS_NONE = 0
ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE = 1
ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED = 2

declare(
    {
        "aclmdlRICaptureBegin": (c_error, (c_void_p, c_int)),
        "aclmdlRICaptureGetInfo": (c_error, (c_void_p, POINTER(c_int), POINTER(c_void_p))),
        "aclmdlRICaptureEnd": (c_error, (c_void_p, POINTER(c_void_p))),
        "aclmdlRICaptureThreadExchangeMode": (c_error, (POINTER(c_int),)),
        "aclmdlRICaptureTaskGrpBegin": (c_error, (c_void_p,)),
        "aclmdlRICaptureTaskGrpEnd": (c_error, (c_void_p, POINTER(c_void_p))),
        "aclmdlRICaptureTaskUpdateBegin": (c_error, (c_void_p, c_void_p)),
        "aclmdlRICaptureTaskUpdateEnd": (c_error, (c_void_p,)),
        "aclmdlRIExecuteAsync": (c_error, (c_void_p, c_void_p)),
        "aclmdlRIExecute": (c_error, (c_void_p, c_int32)),
        "aclmdlRIDestroy": (c_error, (c_void_p,)),
        "aclmdlRIAbort": (c_error, (c_void_p,)),
        "aclmdlRIGetId": (c_error, (c_void_p, POINTER(c_uint32))),
    }
)


def ri_capture_begin(stream: int, mode: int) -> int:
    """``aclmdlRICaptureBegin``: the work queued on ``stream`` from now on is
    recorded, not run, until :func:`ri_capture_end`. Returns ``ret``."""
    try:
        s, m = handle("stream", stream, none_ok=True) or None, int32("mode", mode)
    except BadArgument as e:
        return refuse("acl.mdl.ri_capture_begin", e)
    return _stacks.call(lib.aclmdlRICaptureBegin, s, m)


def ri_capture_get_info(stream: int) -> Tuple[int, int, int]:
    """``aclmdlRICaptureGetInfo``: ``(status, model_ri, ret)``; ``model_ri``
    is 0 when the stream is not capturing."""
    try:
        s = handle("stream", stream, none_ok=True) or None
    except BadArgument as e:
        return 0, 0, refuse("acl.mdl.ri_capture_get_info", e)
    status, model = c_int(0), c_void_p()
    rc = lib.aclmdlRICaptureGetInfo(s, byref(status), byref(model))
    if rc != 0:
        return 0, 0, rc
    return status.value, model.value or 0, rc


def ri_capture_end(stream: int) -> Tuple[int, int]:
    """``aclmdlRICaptureEnd``: ``(model_ri, ret)``. A capture that failed
    leaves no model (0) and ``ret`` says why."""
    try:
        s = handle("stream", stream, none_ok=True) or None
    except BadArgument as e:
        return 0, refuse("acl.mdl.ri_capture_end", e)
    model = c_void_p()
    rc = _stacks.call(lib.aclmdlRICaptureEnd, s, byref(model))
    return (model.value or 0 if rc == 0 else 0), rc


def ri_capture_thread_exchange_mode(mode: int) -> Tuple[int, int]:
    """``aclmdlRICaptureThreadExchangeMode``: sets this thread's capture
    mode; ``(old_mode, ret)``."""
    try:
        value = c_int(int32("mode", mode))
    except BadArgument as e:
        return 0, refuse("acl.mdl.ri_capture_thread_exchange_mode", e)
    rc = lib.aclmdlRICaptureThreadExchangeMode(byref(value))
    return (value.value if rc == 0 else 0), rc


def ri_capture_task_grp_begin(stream: int) -> int:
    """``aclmdlRICaptureTaskGrpBegin``: the tasks captured from now on form
    an updatable group. Returns ``ret``."""
    try:
        s = handle("stream", stream, none_ok=True) or None
    except BadArgument as e:
        return refuse("acl.mdl.ri_capture_task_grp_begin", e)
    return lib.aclmdlRICaptureTaskGrpBegin(s)


def ri_capture_task_grp_end(stream: int) -> Tuple[int, int]:
    """``aclmdlRICaptureTaskGrpEnd``: ``(task_grp, ret)``."""
    try:
        s = handle("stream", stream, none_ok=True) or None
    except BadArgument as e:
        return 0, refuse("acl.mdl.ri_capture_task_grp_end", e)
    group = c_void_p()
    rc = lib.aclmdlRICaptureTaskGrpEnd(s, byref(group))
    return (group.value or 0 if rc == 0 else 0), rc


def ri_capture_task_update_begin(stream: int, task_grp: int) -> int:
    """``aclmdlRICaptureTaskUpdateBegin``: the work queued on ``stream`` from
    now on replaces the group's tasks. Returns ``ret``."""
    try:
        s = handle("stream", stream, none_ok=True) or None
        g = handle("task_grp", task_grp)
    except BadArgument as e:
        return refuse("acl.mdl.ri_capture_task_update_begin", e)
    return lib.aclmdlRICaptureTaskUpdateBegin(s, g)


def ri_capture_task_update_end(stream: int) -> int:
    """``aclmdlRICaptureTaskUpdateEnd``. Returns ``ret``."""
    try:
        s = handle("stream", stream, none_ok=True) or None
    except BadArgument as e:
        return refuse("acl.mdl.ri_capture_task_update_end", e)
    return lib.aclmdlRICaptureTaskUpdateEnd(s)


def ri_execute_async(model_ri: int, stream: int) -> int:
    """``aclmdlRIExecuteAsync``: queues a replay of the model on ``stream``.
    Returns ``ret``."""
    try:
        m, s = handle("model_ri", model_ri), handle("stream", stream, none_ok=True) or None
    except BadArgument as e:
        return refuse("acl.mdl.ri_execute_async", e)
    return _stacks.call(lib.aclmdlRIExecuteAsync, m, s)


def ri_execute(model_ri: int, timeout: int) -> int:
    """``aclmdlRIExecute``: a replay on the default stream, waited for
    (``timeout`` in ms, -1: no limit). Returns ``ret``."""
    try:
        m, t = handle("model_ri", model_ri), int32("timeout", timeout)
    except BadArgument as e:
        return refuse("acl.mdl.ri_execute", e)
    return _stacks.call(lib.aclmdlRIExecute, m, t)


def ri_destroy(model_ri: int) -> int:
    """``aclmdlRIDestroy``: the handle goes at once; the memory the model
    holds goes back once its queued replays have run. Returns ``ret``."""
    try:
        m = handle("model_ri", model_ri)
    except BadArgument as e:
        return refuse("acl.mdl.ri_destroy", e)
    return _stacks.call(lib.aclmdlRIDestroy, m)


def ri_abort(model_ri: int) -> int:
    """``aclmdlRIAbort``: the model's queued replays stop at their next task.
    Returns ``ret``."""
    try:
        m = handle("model_ri", model_ri)
    except BadArgument as e:
        return refuse("acl.mdl.ri_abort", e)
    return lib.aclmdlRIAbort(m)


def ri_get_id(model_ri: int) -> Tuple[int, int]:
    """``aclmdlRIGetId``: ``(id, ret)``."""
    try:
        m = handle("model_ri", model_ri)
    except BadArgument as e:
        return 0, refuse("acl.mdl.ri_get_id", e)
    number = c_uint32(0)
    rc = lib.aclmdlRIGetId(m, byref(number))
    return (number.value if rc == 0 else 0), rc
