"""The PEP 517 build backend of the Python package (``pip install .``).

Why not maturin: maturin packages Rust *extension modules* (pyo3, cffi,
uniffi) or binaries, and has no mode for a plain C-ABI cdylib that Python
loads with ctypes. The package must drive the very ``libaclalloc.so`` that C
code in the process uses (one library, one state), so the wheel carries that
library unchanged. This backend needs nothing from PyPI: it runs
``cargo build --release --lib`` and zips the library beside the pure-Python
sources of ``python/aclalloc`` into a ``py3-none-<platform>`` wheel (ctypes
depends on no CPython ABI).

``ACLALLOC_BUILD_LIB=/path/to/libaclalloc.so`` packs an already built library
instead of running cargo.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import shutil
import subprocess
import sysconfig
import tarfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NAME = "aclalloc"
SONAME = "libaclalloc.so.0"


def _version() -> str:
    text = (ROOT / "Cargo.toml").read_text()
    match = re.search(r'^version\s*=\s*"([^"]+)"', text, re.MULTILINE)
    if not match:
        raise RuntimeError("Cargo.toml has no package version")
    return match.group(1)


def _metadata() -> str:
    readme = (ROOT / "README.md").read_text()
    return (
        "Metadata-Version: 2.1\n"
        f"Name: {NAME}\n"
        f"Version: {_version()}\n"
        "Summary: CANN's allocator API (pyACL acl.rt.allocator_*, torch_npu's "
        "memory API, pluggable allocators) over libaclalloc\n"
        "License: MIT OR Apache-2.0\n"
        "Requires-Python: >=3.9\n"
        "Classifier: Programming Language :: Python :: 3\n"
        "Classifier: Operating System :: POSIX :: Linux\n"
        "Description-Content-Type: text/markdown\n"
        "\n" + readme
    )


def _platform_tag() -> str:
    return re.sub(r"[^A-Za-z0-9]", "_", sysconfig.get_platform())


def _wheel_file() -> str:
    return (
        "Wheel-Version: 1.0\n"
        "Generator: aclalloc_build\n"
        "Root-Is-Purelib: false\n"
        f"Tag: py3-none-{_platform_tag()}\n"
    )


def _dist_info() -> str:
    return f"{NAME}-{_version()}.dist-info"


def _built_library() -> Path:
    given = os.environ.get("ACLALLOC_BUILD_LIB")
    if given:
        return Path(given)
    subprocess.run(["cargo", "build", "--release", "--lib"], cwd=ROOT, check=True)
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    if not target.is_absolute():
        target = ROOT / target
    return target / "release" / "libaclalloc.so"


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return f"{path},sha256={digest.decode()},{len(data)}"


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    dist_info = Path(metadata_directory) / _dist_info()
    dist_info.mkdir(parents=True, exist_ok=True)
    (dist_info / "METADATA").write_text(_metadata())
    (dist_info / "WHEEL").write_text(_wheel_file())
    return dist_info.name


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    library = _built_library()
    if not library.is_file():
        raise RuntimeError(f"the built library {library} does not exist")
    files: list[tuple[str, bytes, int]] = []
    package = ROOT / "python" / NAME
    for path in sorted(package.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            rel = path.relative_to(ROOT / "python").as_posix()
            files.append((rel, path.read_bytes(), 0o644))
    files.append((f"{NAME}/_native/{SONAME}", library.read_bytes(), 0o755))
    dist_info = _dist_info()
    files.append((f"{dist_info}/METADATA", _metadata().encode(), 0o644))
    files.append((f"{dist_info}/WHEEL", _wheel_file().encode(), 0o644))

    name = f"{NAME}-{_version()}-py3-none-{_platform_tag()}.whl"
    out = Path(wheel_directory) / name
    record = [_record_line(p, data) for p, data, _ in files]
    record.append(f"{dist_info}/RECORD,,")
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as wheel:
        for path, data, mode in files:
            info = zipfile.ZipInfo(path, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            wheel.writestr(info, data)
        wheel.writestr(f"{dist_info}/RECORD", "\n".join(record) + "\n")
    return name


def build_sdist(sdist_directory, config_settings=None):
    base = f"{NAME}-{_version()}"
    out = Path(sdist_directory) / f"{base}.tar.gz"
    listed = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.split()
    with tarfile.open(out, "w:gz") as sdist:
        for rel in listed:
            if (ROOT / rel).is_file():
                sdist.add(ROOT / rel, arcname=f"{base}/{rel}")
        pkg_info = ROOT / "build" / "PKG-INFO"
        pkg_info.parent.mkdir(exist_ok=True)
        pkg_info.write_text(_metadata())
        sdist.add(pkg_info, arcname=f"{base}/PKG-INFO")
        shutil.rmtree(pkg_info.parent / "__pycache__", ignore_errors=True)
    return out.name
