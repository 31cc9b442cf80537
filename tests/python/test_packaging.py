"""The installed package: typed, loads its own library with RTLD_GLOBAL, and
ACLALLOC_LIB points it at another build."""

from __future__ import annotations

import shutil
from pathlib import Path

import aclalloc
from conftest import run_python


def test_the_wheel_carries_the_library_and_py_typed():
    package = Path(aclalloc.__file__).parent
    assert (package / "py.typed").is_file()
    assert (package / "_native" / "libaclalloc.so.0").is_file()
    assert aclalloc.library_path() == package / "_native" / "libaclalloc.so.0"


def test_aclalloc_lib_points_at_another_build(tmp_path):
    copy = tmp_path / "libaclalloc.so"
    shutil.copy(aclalloc.library_path(), copy)
    result = run_python(
        """
        import aclalloc
        from aclalloc import acl
        print(aclalloc.library_path())
        assert acl.init(None) == 0
        with open("/proc/self/maps") as maps:
            print(any(line.rstrip().endswith("/libaclalloc.so") for line in maps))
        """,
        env={"ACLALLOC_LIB": str(tmp_path)},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [str(copy), "True"]


def test_a_missing_library_is_a_clear_import_error(tmp_path):
    result = run_python("import aclalloc", env={"ACLALLOC_LIB": str(tmp_path / "nope.so")})
    assert result.returncode != 0
    assert "ImportError: aclalloc cannot load its library" in result.stderr
    assert "ACLALLOC_LIB" in result.stderr
