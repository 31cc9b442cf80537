"""The allocation history of ``_record_memory_history`` / ``_snapshot()["device_traces"]``.

Phase 1 (this version): the library records no history yet, so
:func:`record` warns that traces will be empty, and :func:`device_traces`
returns one empty list per device unless the pool's JSON snapshot carries
``device_traces``.

Phase 2 plugs in here and nowhere else: when libaclalloc exports its
recorder (``aclallocPoolRecordHistory(pool, maxEntries)``), :func:`record`
calls it on the default pool, and :func:`device_traces` converts the JSON's
``device_traces`` entries (``action`` in ``alloc``, ``free_requested``,
``free_completed``, ``segment_alloc``, ``segment_free``, ``oom``, with
``addr``, ``size``, ``stream``, ``time_us``) to PyTorch's trace entries.
"""

from __future__ import annotations

import warnings
from typing import Any, Dict, List, Optional

from .._lib import lib

_ACTIONS = {"alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "oom"}
_settings: Dict[str, Any] = {"enabled": None, "max_entries": 0}


def recorder_available() -> bool:
    """True when the loaded libaclalloc records allocation history."""
    return hasattr(lib, "aclallocPoolRecordHistory")


def record(enabled: Optional[str], max_entries: int) -> None:
    """Turns recording on (``"state"``/``"all"``) or off (None)."""
    _settings.update(enabled=enabled, max_entries=max_entries)
    if enabled is None:
        return
    if not recorder_available():
        warnings.warn(
            "this libaclalloc records no allocation history yet: _snapshot()['device_traces'] "
            "stays empty (segments and blocks are exact)",
            RuntimeWarning,
            stacklevel=3,
        )


def _entry(event: Dict[str, Any]) -> Dict[str, Any]:
    return {
        "action": event["action"],
        "addr": event["addr"],
        "size": event["size"],
        "stream": event.get("stream", 0),
        "time_us": event.get("time_us", 0),
        "frames": [],
    }


def device_traces(raw: Dict[str, Any], device_count: int, pool_device: int) -> List[List[Any]]:
    """One list of trace entries per device; the pool's go to its device."""
    traces: List[List[Any]] = [[] for _ in range(device_count)]
    events = raw.get("device_traces")
    if isinstance(events, list) and events and isinstance(events[0], list):
        events = events[0]
    if isinstance(events, list) and 0 <= pool_device < device_count:
        traces[pool_device] = [_entry(e) for e in events if e.get("action") in _ACTIONS]
    return traces
