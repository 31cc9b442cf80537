"""Allocation stacks from Python: ``_record_memory_history(context=...,
stacks=...)`` with PyTorch's meanings; a block still live at the end (a leak)
shows the Python line that allocated it, in the snapshot's blocks (what
``torch.cuda._memory_viz``'s memory flame graph reads) and trace."""

from __future__ import annotations

import json

from conftest import run_python

PROGRAM = """
import json, sys
from aclalloc import npu

def load_weights():
    return npu.caching_allocator_alloc(3 << 20)  # allocates

def free_it(ptr):
    npu.caching_allocator_delete(ptr)  # frees

npu.memory._record_memory_history(context=CONTEXT, stacks=STACKS, max_entries=100)
kept = load_weights()
free_it(load_weights())
snapshot = npu.memory._snapshot()
live = [b for s in snapshot["segments"] for b in s["blocks"] if b["state"] == "active_allocated"]
json.dump({"live": live, "trace": snapshot["device_traces"][0]}, sys.stdout)
"""


def _run(context: str, stacks: str) -> dict:
    code = PROGRAM.replace("CONTEXT", repr(context)).replace("STACKS", repr(stacks))
    done = run_python(code)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _line(marker: str) -> int:
    """The line of ``PROGRAM`` marked ``# marker``, as ``python -c`` numbers it."""
    lines = PROGRAM.splitlines()
    return next(n for n, text in enumerate(lines, 1) if f"# {marker}" in text)


def _flame_line(block: dict) -> str:
    """``_memory_viz.memory()``'s line for a block: its frames outermost
    first as ``file:line:name``."""
    frames = reversed(block["frames"])
    fragment = ";".join(f"{f['filename'].split('/')[-1]}:{f['line']}:{f['name']}" for f in frames)
    return f"{block['state']};{fragment or '<non-python>'} {block['requested_size']}"


def test_a_live_blocks_python_line_shows_in_the_snapshot_and_the_trace():
    out = _run("all", "python")
    (block,) = out["live"]
    assert block["frames"][0] == {
        "filename": "<string>",
        "line": _line("allocates"),
        "name": "load_weights",
    }
    assert f"<string>:{_line('allocates')}:load_weights 3145728" in _flame_line(block)
    allocs = [e for e in out["trace"] if e["action"] == "alloc"]
    frees = [e for e in out["trace"] if e["action"].startswith("free")]
    assert [e["frames"][0]["name"] for e in allocs] == ["load_weights"] * 2
    assert frees and all(e["frames"][0]["name"] == "free_it" for e in frees), frees


def test_context_alloc_leaves_frees_without_stacks_and_state_leaves_the_trace_without():
    out = _run("alloc", "all")
    assert all(e["frames"] == [] for e in out["trace"] if e["action"].startswith("free"))
    names = [f["name"] for e in out["trace"] if e["action"] == "alloc" for f in e["frames"]]
    assert "load_weights" in names
    out = _run("state", "python")
    assert all(e["frames"] == [] for e in out["trace"])
    assert out["live"][0]["frames"][0]["name"] == "load_weights"
