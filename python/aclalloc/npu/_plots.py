"""SVG pictures of a memory snapshot, for ``_save_segment_usage`` and
``_save_memory_usage`` (PyTorch's ``_memory_viz.segments`` / ``memory``
draw the same two views): standalone SVG files a browser shows, each block
with a tooltip (its ``<title>``).

- segment usage: one row per segment, its width to scale, its blocks
  coloured by state (allocated, waiting to be freed, free);
- memory usage: the allocated bytes split by where they were allocated (the
  innermost recorded frame of each live block, ``<no stack>`` without one),
  largest first, as one bar to scale with a legend.
"""

from __future__ import annotations

import collections
from html import escape
from typing import Any, Dict, List

_WIDTH = 1000
_ROW = 22
_COLORS = {
    "active_allocated": "#d9534f",
    "active_pending_free": "#f0ad4e",
    "active_awaiting_free": "#f0ad4e",
    "inactive": "#d0d0d0",
}
_PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1")


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def _svg(width: int, height: int, body: List[str]) -> str:
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">'
    )
    return "\n".join([head, *body, "</svg>", ""])


def _rect(x: float, y: float, w: float, h: float, color: str, title: str) -> str:
    return (
        f'<rect x="{x:.2f}" y="{y}" width="{max(w, 0.5):.2f}" height="{h}" fill="{color}" '
        f'stroke="#ffffff" stroke-width="0.5"><title>{escape(title)}</title></rect>'
    )


def segments(snapshot: Dict[str, Any]) -> str:
    """Every segment of ``snapshot`` as a row of its blocks."""
    segs = sorted(snapshot.get("segments", []), key=lambda s: (s["device"], s["address"]))
    largest = max((s["total_size"] for s in segs), default=1) or 1
    scale = (_WIDTH - 20) / largest
    body = [f'<text x="10" y="16">{len(segs)} segment(s), widths to scale</text>']
    for row, seg in enumerate(segs):
        y = 28 + row * _ROW
        x = 10.0
        label = (
            f"device {seg['device']} segment {seg['address']:#x}: "
            f"{_size(seg['total_size'])}, allocated {_size(seg['allocated_size'])}"
        )
        body.append(f"<g><title>{escape(label)}</title>")
        for block in seg.get("blocks", []):
            w = block["size"] * scale
            color = _COLORS.get(block["state"], "#999999")
            title = f"{block['state']} {_size(block['size'])} at {block['address']:#x}"
            body.append(_rect(x, y, w, _ROW - 4, color, title))
            x += w
        body.append("</g>")
    height = 40 + max(len(segs), 1) * _ROW
    return _svg(_WIDTH, height, body)


def _where(block: Dict[str, Any]) -> str:
    frames = block.get("frames") or []
    if not frames:
        return "<no stack>"
    f = frames[0]
    return f"{f.get('name', '?')} ({f.get('filename', '?')}:{f.get('line', 0)})"


def memory(snapshot: Dict[str, Any]) -> str:
    """The allocated bytes of ``snapshot`` by allocating frame."""
    by_site: Dict[str, int] = collections.Counter()
    for seg in snapshot.get("segments", []):
        for block in seg.get("blocks", []):
            if block["state"] == "active_allocated":
                by_site[_where(block)] += block["size"]
    total = sum(by_site.values())
    sites = sorted(by_site.items(), key=lambda kv: -kv[1])
    body = [f'<text x="10" y="16">{escape(_size(total))} allocated</text>']
    scale = (_WIDTH - 20) / total if total else 0.0
    x = 10.0
    for i, (site, size) in enumerate(sites):
        color = _PALETTE[i % len(_PALETTE)]
        body.append(_rect(x, 28, size * scale, _ROW, color, f"{site}: {_size(size)}"))
        y = 28 + (i + 2) * _ROW
        body.append(_rect(10, y - 12, 12, 12, color, site))
        body.append(f'<text x="28" y="{y - 2}">{escape(f"{_size(size)}  {site}")}</text>')
    height = 40 + (len(sites) + 2) * _ROW
    return _svg(_WIDTH, height, body)
