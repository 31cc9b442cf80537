"""The Python examples run and succeed."""

from __future__ import annotations

import pickle
import subprocess
import sys

from conftest import ROOT


def _run(name: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "python_examples" / name), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_pyacl_custom_allocator():
    result = _run("pyacl_custom_allocator.py")
    assert result.returncode == 0, result.stderr + result.stdout
    assert "400 launches on 2 streams, every workspace returned" in result.stdout
    assert "stream0: 200 allocs, 200 frees, 4 device mallocs" in result.stdout


def test_torch_npu_memory_stats(tmp_path):
    snapshot = tmp_path / "snap.pickle"
    result = _run("torch_npu_memory_stats.py", str(snapshot))
    assert result.returncode == 0, result.stderr + result.stdout
    assert "aclalloc caching pool memory summary" in result.stdout
    assert "empty_cache released" in result.stdout
    with open(snapshot, "rb") as f:
        data = pickle.load(f)
    assert data["segments"] and "device_traces" in data


def test_sleep_wake():
    result = _run("sleep_wake.py")
    assert result.returncode == 0, result.stderr + result.stdout
    assert "asleep: device free" in result.stdout
    assert "a copy into sleeping memory is refused" in result.stdout
    assert "sleep and wake: ok" in result.stdout


def test_region_sleep():
    result = _run("region_sleep.py")
    assert result.returncode == 0, result.stderr + result.stdout
    assert "asleep: device free back to" in result.stdout
    assert 'region tagged "weights"' in result.stdout
    assert "region sleep and wake: ok" in result.stdout
