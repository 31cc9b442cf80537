"""The package's ctypes declarations held to the C headers.

The package declares every C function it calls with ``aclalloc._lib.declare``,
every structure it mirrors with ``aclalloc._lib.mirrors`` and every library
function it takes as a function pointer with ``aclalloc._lib.function_pointer``.
These tests compare those registries with ``include/aclalloc.h`` and
``include/acl/*.h``: each function's argument count, argument types and result
type; each structure's fields, by name and order and type, and its layout
(sizes, offsets, alignment) as the C compiler lays it out; and the constants
the package copies. The headers are cbindgen's output, regular enough for the
small parser below (one declaration per statement, function pointers only
through typedefs, no preprocessor conditionals besides C++ guards).

Types match when ctypes passes them the same way: integers of the same size
and signedness (``c_int`` for ``int32_t``), a 4-byte integer for a C enum,
``c_void_p`` for any data pointer (handles, buffers, out-parameters the
package reads as addresses), ``c_char_p`` for ``char *``, ``POINTER(T)`` for
``T *``, and for a function pointer a ``CFUNCTYPE`` whose result and
arguments match in turn.
"""

from __future__ import annotations

import ast
import ctypes
import importlib
import os
import pkgutil
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest

import aclalloc
from aclalloc import _lib

ROOT = Path(__file__).resolve().parents[2]
INCLUDE = ROOT / "include"
HEADERS = [INCLUDE / "aclalloc.h", *sorted((INCLUDE / "acl").glob("*.h"))]
SOURCES = ROOT / "python" / "aclalloc"

CType = Tuple[Any, ...]
"""A C type: ``("void",)``, ``("bool",)``, ``("char",)``, ``("int", signed, size)``,
``("float", size)``, ``("enum", name)``, ``("struct", name)``, ``("union", name)``,
``("ptr", target)``, ``("array", element, length)``, ``("fn", result, params)``
or ``("named", name)`` (a typedef, resolved by :meth:`Header.resolve`)."""


def _int(signed: bool, c: Any) -> CType:
    return ("int", signed, ctypes.sizeof(c))


_BUILTINS: Dict[str, CType] = {
    "void": ("void",),
    "bool": ("bool",),
    "_Bool": ("bool",),
    "char": ("char",),
    "signed char": ("int", True, 1),
    "unsigned char": ("int", False, 1),
    "short": _int(True, ctypes.c_short),
    "unsigned short": _int(False, ctypes.c_short),
    "int": _int(True, ctypes.c_int),
    "unsigned": _int(False, ctypes.c_int),
    "unsigned int": _int(False, ctypes.c_int),
    "long": _int(True, ctypes.c_long),
    "unsigned long": _int(False, ctypes.c_long),
    "long long": _int(True, ctypes.c_longlong),
    "unsigned long long": _int(False, ctypes.c_longlong),
    "float": ("float", 4),
    "double": ("float", 8),
    "size_t": _int(False, ctypes.c_size_t),
    "ssize_t": _int(True, ctypes.c_ssize_t),
    "intptr_t": _int(True, ctypes.c_void_p),
    "uintptr_t": _int(False, ctypes.c_void_p),
    **{f"int{8 * n}_t": ("int", True, n) for n in (1, 2, 4, 8)},
    **{f"uint{8 * n}_t": ("int", False, n) for n in (1, 2, 4, 8)},
}
_BASE_WORDS = {"void", "bool", "_Bool", "char", "short", "int", "long", "signed", "unsigned"}
_BASE_WORDS |= {"float", "double"}
_QUALIFIERS = {"const", "volatile", "struct", "union", "enum"}
_TOKEN = re.compile(r"[A-Za-z_]\w*|\*|\[[^\]]*\]|\S")
_ENUM_SIZE = 4
"""What cbindgen's C enums (all values fitting an int) take on the supported ABIs."""


@dataclass
class Header:
    """What the headers declare."""

    functions: Dict[str, Tuple[CType, List[CType]]] = field(default_factory=dict)
    typedefs: Dict[str, CType] = field(default_factory=dict)
    records: Dict[str, Tuple[str, List[Tuple[str, CType]]]] = field(default_factory=dict)
    """struct or union name -> ("struct" or "union", fields)."""
    enums: Dict[str, Dict[str, int]] = field(default_factory=dict)
    constants: Dict[str, Any] = field(default_factory=dict)

    def resolve(self, ctype: CType) -> CType:
        """``ctype`` with typedef names replaced until the top level is not one."""
        seen = set()
        while ctype[0] == "named":
            name = ctype[1]
            if name in seen:
                raise ValueError(f"typedef loop at {name}")
            seen.add(name)
            if name in _BUILTINS:
                ctype = _BUILTINS[name]
            elif name in self.typedefs:
                ctype = self.typedefs[name]
            elif name in self.records:
                ctype = (self.records[name][0], name)
            elif name in self.enums:
                ctype = ("enum", name)
            else:
                raise KeyError(f"the headers do not define the type {name}")
        return ctype

    def spell(self, ctype: CType) -> str:
        """A readable C spelling, for messages."""
        kind = ctype[0]
        if kind == "named" or kind in ("enum", "struct", "union"):
            return str(ctype[1])
        if kind == "ptr":
            return self.spell(ctype[1]) + " *"
        if kind == "array":
            return f"{self.spell(ctype[1])}[{ctype[2]}]"
        if kind == "fn":
            params = ", ".join(self.spell(p) for p in ctype[2]) or "void"
            return f"{self.spell(ctype[1])} (*)({params})"
        if kind == "int":
            return f"{'' if ctype[1] else 'u'}int{8 * ctype[2]}_t"
        if kind == "float":
            return {4: "float", 8: "double"}.get(ctype[1], "long double")
        return kind


def _strip(text: str) -> str:
    # The C++ guards wrap `extern "C" {` and its `}` in separate conditionals,
    # which would unbalance the braces: drop each guarded piece first.
    text = re.sub(r"#ifdef __cplusplus.*?#endif[^\n]*", " ", text, flags=re.S)
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    return text


def _statements(text: str) -> List[str]:
    """Top-level statements (split at `;` outside braces and parentheses)."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "{(":
            depth += 1
        elif ch in "})":
            depth -= 1
        elif ch == ";" and depth == 0:
            out.append(" ".join(text[start:i].split()))
            start = i + 1
    assert depth == 0 and not text[start:].strip(), "unbalanced header"
    return [s for s in out if s]


def _split_commas(text: str) -> List[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "({[":
            depth += 1
        elif ch in ")}]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _number(text: str, header: Header) -> int:
    text = text.strip().rstrip("uUlL")
    if text in header.constants:
        return int(header.constants[text])
    return int(text, 0)


def _declarator(text: str, header: Header) -> Tuple[CType, Optional[str]]:
    """``type name`` (name optional, arrays allowed) as (type, name)."""
    tokens = [t for t in _TOKEN.findall(text) if t not in _QUALIFIERS]
    i = 0
    words = []
    while i < len(tokens) and tokens[i] in _BASE_WORDS:
        words.append(tokens[i])
        i += 1
    if not words:
        words, i = [tokens[0]], 1
    base = " ".join(words)
    base = {"long int": "long", "unsigned long int": "unsigned long"}.get(base, base)
    ctype: CType = ("named", base)
    while i < len(tokens) and tokens[i] == "*":
        ctype = ("ptr", ctype)
        i += 1
    name = None
    if i < len(tokens) and re.fullmatch(r"[A-Za-z_]\w*", tokens[i]):
        name = tokens[i]
        i += 1
    lengths = []
    while i < len(tokens) and tokens[i].startswith("["):
        lengths.append(_number(tokens[i][1:-1], header))
        i += 1
    if i != len(tokens):
        raise ValueError(f"cannot parse the declaration {text!r}")
    for length in reversed(lengths):
        ctype = ("array", ctype, length)
    return ctype, name


def _params(text: str, header: Header) -> List[CType]:
    if text.strip() in ("", "void"):
        return []
    return [_declarator(p, header)[0] for p in _split_commas(text)]


_FN_TYPEDEF = re.compile(r"typedef (.+?)\(\s*\*\s*(\w+)\s*\)\s*\((.*)\)")
_RECORD = re.compile(r"typedef (struct|union|enum)\s*(\w+)?\s*\{(.*)\}\s*(\w+)")
_OPAQUE = re.compile(r"typedef (struct|union) (\w+) (\w+)")
_FUNCTION = re.compile(r"(.*?[\s*])(\w+)\s*\((.*)\)")
_CONSTANT = re.compile(r"static const (.+?) (\w+) = (.+)")
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)[ \t]+(\S.*?)[ \t]*$", re.M)


def parse_headers(paths: List[Path]) -> Header:
    header = Header()
    texts = [p.read_text() for p in paths]
    for text in texts:
        for name, value in _DEFINE.findall(text):
            try:
                header.constants[name] = int(value.rstrip("uUlL"), 0)
            except ValueError:
                header.constants[name] = value.strip('"')
    for text in texts:
        stripped = re.sub(r"^\s*#[^\n]*", " ", _strip(text), flags=re.M)
        for statement in _statements(stripped):
            _parse_statement(statement, header)
    return header


def _parse_statement(statement: str, header: Header) -> None:
    match = _RECORD.fullmatch(statement)
    if match:
        kind, tag, body, name = match.groups()
        if kind == "enum":
            values, next_value = {}, 0
            for item in _split_commas(body):
                key, _, value = (part.strip() for part in item.partition("="))
                next_value = _number(value, header) if value else next_value
                values[key] = next_value
                header.constants[key] = next_value
                next_value += 1
            for enum_name in {tag, name} - {None}:
                header.enums[enum_name] = values
        else:
            if "{" in body:
                raise ValueError(f"nested definitions in {name} are not parsed")
            fields = [_declarator(f, header) for f in body.split(";") if f.strip()]
            record = (kind, [(str(n), t) for t, n in fields])
            for record_name in {tag, name} - {None}:
                header.records[record_name] = record
        return
    match = _OPAQUE.fullmatch(statement)
    if match:
        header.typedefs.setdefault(match.group(3), (match.group(1), match.group(2)))
        return
    match = _FN_TYPEDEF.fullmatch(statement)
    if match:
        result, name, params = match.groups()
        fn = ("fn", _declarator(result, header)[0], _params(params, header))
        header.typedefs[name] = ("ptr", fn)
        return
    if statement.startswith("typedef "):
        ctype, name = _declarator(statement[len("typedef ") :], header)
        assert name is not None, statement
        header.typedefs[name] = ctype
        return
    match = _CONSTANT.fullmatch(statement)
    if match:
        header.constants[match.group(2)] = _number(match.group(3), header)
        return
    match = _FUNCTION.fullmatch(statement)
    if match:
        result, name, params = match.groups()
        header.functions[name] = (_declarator(result, header)[0], _params(params, header))
        return
    raise ValueError(f"cannot parse the header statement {statement!r}")


# -- ctypes against C ------------------------------------------------------------

_SIGNED_CODES = "bhilq"
_UNSIGNED_CODES = "BHILQ"


def _scalar(py: Any) -> Optional[CType]:
    """A ctypes simple type as a C scalar type (None: not a scalar)."""
    if not (isinstance(py, type) and issubclass(py, ctypes._SimpleCData)):
        return None
    code = py._type_
    if code in _SIGNED_CODES or code in _UNSIGNED_CODES:
        return ("int", code in _SIGNED_CODES, ctypes.sizeof(py))
    if code == "c":
        return ("char",)
    if code == "?":
        return ("bool",)
    if code in "fdg":
        return ("float", ctypes.sizeof(py))
    return None


def _name(py: Any) -> str:
    return getattr(py, "__name__", repr(py))


class Matcher:
    def __init__(self, header: Header) -> None:
        self.header = header

    def errors(self, py: Any, c: CType, where: str) -> List[str]:
        """Why ctypes type ``py`` does not pass or return C type ``c`` (empty: it does)."""
        c = self.header.resolve(c)
        kind = c[0]
        bad = [f"{where}: ctypes {_name(py)} for C {self.header.spell(c)}"]
        if kind == "void":
            return [] if py is None else bad
        if py is None:
            return bad
        if kind in ("int", "char", "bool", "float"):
            got = _scalar(py)
            if kind == "char" and got is not None and got[0] == "int" and got[2] == 1:
                return []
            return [] if got == c else bad
        if kind == "enum":
            got = _scalar(py)
            return [] if got is not None and got[0] == "int" and got[2] == _ENUM_SIZE else bad
        if kind in ("struct", "union"):
            return [] if _lib.STRUCTS.get(c[1]) is py else bad
        if kind == "array":
            if not (isinstance(py, type) and issubclass(py, ctypes.Array) and py._length_ == c[2]):
                return bad
            return self.errors(py._type_, c[1], f"{where}[]")
        if kind == "ptr":
            return self._pointer_errors(py, self.header.resolve(c[1]), where, bad)
        raise AssertionError(f"{where}: unexpected C type {c}")

    def _pointer_errors(self, py: Any, target: CType, where: str, bad: List[str]) -> List[str]:
        if target[0] == "fn":
            if not (isinstance(py, type) and issubclass(py, ctypes._CFuncPtr)):
                return bad
            return self.function_errors(py._restype_, py._argtypes_ or (), target, f"{where} ->")
        if py is ctypes.c_void_p:
            return []
        if py is ctypes.c_char_p:
            return [] if target == ("char",) else bad
        if isinstance(py, type) and issubclass(py, ctypes._Pointer):
            if target == ("void",):
                return []
            return self.errors(py._type_, target, f"*{where}")
        return bad

    def function_errors(self, restype: Any, argtypes: Any, fn: CType, where: str) -> List[str]:
        _, result, params = fn
        out = self.errors(restype, result, f"{where} result")
        if len(argtypes) != len(params):
            spelled = ", ".join(self.header.spell(p) for p in params) or "void"
            return [
                *out,
                f"{where}: {len(argtypes)} ctypes arguments, C has {len(params)} ({spelled})",
            ]
        for i, (py, c) in enumerate(zip(argtypes, params)):
            out += self.errors(py, c, f"{where} argument {i + 1}")
        return out


# -- fixtures ----------------------------------------------------------------------


def _import_all() -> None:
    """Imports every module of the package, so that every declaration is made."""
    for module in pkgutil.walk_packages(aclalloc.__path__, "aclalloc."):
        importlib.import_module(module.name)


@pytest.fixture(scope="module")
def header() -> Header:
    _import_all()
    return parse_headers(HEADERS)


@pytest.fixture(scope="module")
def c_layouts(header: Header, tmp_path_factory: pytest.TempPathFactory) -> Dict[str, int]:
    """``sizeof``, ``_Alignof`` and each field's ``offsetof`` and size of every
    mirrored structure, as the C compiler lays them out: ``{"T": size,
    "T@align": alignment, "T.f": offset, "T.f@size": size}``. The program
    includes every header the parser reads (``acl/acl_rt_memory_soma.h`` is
    in none of the others, as in CANN)."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.fail("no C compiler (cc) on PATH; CI installs one")
    lines = []
    for name in sorted(_lib.STRUCTS):
        if name not in header.records:
            continue  # reported by test_structures_match_the_headers
        lines.append(f'  printf("{name} %zu\\n", sizeof({name}));')
        lines.append(f'  printf("{name}@align %zu\\n", (size_t)_Alignof({name}));')
        for field_name, _ in header.records[name][1]:
            key = f"{name}.{field_name}"
            lines.append(f'  printf("{key} %zu\\n", offsetof({name}, {field_name}));')
            lines.append(f'  printf("{key}@size %zu\\n", sizeof((({name} *)0)->{field_name}));')
    source = tmp_path_factory.mktemp("layouts") / "layouts.c"
    includes = "".join(f"#include <{h.relative_to(INCLUDE).as_posix()}>\n" for h in HEADERS)
    source.write_text(
        "#include <stddef.h>\n#include <stdio.h>\n"
        + includes
        + "int main(void) {\n"
        + "\n".join(lines)
        + "\n  return 0;\n}\n"
    )
    exe = source.with_suffix("")
    subprocess.run(
        [cc, "-std=c11", "-Wall", "-Werror", "-I", str(INCLUDE), str(source), "-o", str(exe)],
        check=True,
    )
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    return {key: int(value) for key, value in (line.split() for line in out.splitlines())}


# -- tests -------------------------------------------------------------------------


def test_the_parser_reads_the_headers(header: Header) -> None:
    """Guards the parser itself: known declarations come out as written."""
    assert header.functions["aclrtMemcpy"] == (
        ("named", "aclError"),
        [
            ("ptr", ("named", "void")),
            ("named", "size_t"),
            ("ptr", ("named", "void")),
            ("named", "size_t"),
            ("named", "aclrtMemcpyKind"),
        ],
    )
    assert header.resolve(("named", "aclError")) == ("int", True, ctypes.sizeof(ctypes.c_int))
    assert header.functions["aclallocSleep"][1][0] == ("ptr", ("ptr", ("named", "char")))
    assert header.resolve(header.typedefs["aclrtAllocatorAllocFunc"][1]) == (
        "fn",
        ("ptr", ("named", "void")),
        [("named", "aclrtAllocator"), ("named", "size_t")],
    )
    kind, fields = header.records["aclallocPluggableDeviceStats"]
    assert kind == "struct" and fields[0] == ("allocation", ("array", ("named", "aclallocStat"), 3))
    assert header.records["aclrtErrorInfoDetail"][0] == "union"
    # A nested structure and an array in one record (acl_rt_memory_soma.h).
    kind, fields = header.records["aclrtMemPoolProps"]
    assert fields[2] == ("location", ("named", "aclrtMemLocation"))
    assert fields[4] == ("reserved", ("array", ("named", "uint8_t"), 32))
    assert header.resolve(fields[2][1]) == ("struct", "aclrtMemLocation")
    assert header.enums["aclrtMemMallocPolicy"]["ACL_MEM_TYPE_HIGH_BAND_WIDTH"] == 0x1000
    assert header.constants["ACL_ERROR_RT_MEMORY_ALLOCATION"] == 207001
    assert header.constants["ACLALLOC_STAT_KEY_COUNT"] == 121
    assert len(header.functions) > 200


def test_the_matcher_refuses_what_differs(header: Header) -> None:
    """Guards the comparison itself, on declarations made up here."""
    matcher = Matcher(header)
    good = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)
    assert not matcher.errors(good, ("named", "aclrtAllocatorAllocFunc"), "f")
    for wrong in (
        ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32),
        ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_size_t),
        ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p),
        ctypes.c_void_p,
    ):
        assert matcher.errors(wrong, ("named", "aclrtAllocatorAllocFunc"), "f"), wrong
    memset = ("fn", *header.functions["aclrtMemset"])
    args = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_size_t]
    assert not matcher.function_errors(ctypes.c_int, args, memset, "aclrtMemset")
    for i, wrong in ((1, ctypes.c_uint32), (2, ctypes.c_int64), (3, ctypes.c_double)):
        bad = [*args[:i], wrong, *args[i + 1 :]]
        assert matcher.function_errors(ctypes.c_int, bad, memset, "aclrtMemset"), bad
    assert matcher.function_errors(ctypes.c_int, args[:3], memset, "aclrtMemset")
    assert matcher.function_errors(ctypes.c_void_p, args, memset, "aclrtMemset")
    assert matcher.errors(ctypes.c_char_p, ("ptr", ("named", "int32_t")), "p")
    assert matcher.errors(ctypes.POINTER(ctypes.c_uint32), ("ptr", ("named", "int32_t")), "p")
    assert not matcher.errors(ctypes.POINTER(ctypes.c_char_p), ("ptr", ("ptr", ("char",))), "p")
    assert matcher.errors(ctypes.c_int64, ("named", "aclallocStat"), "s")


def test_functions_match_the_headers(header: Header) -> None:
    """Every function the package declares: its arguments and result as C has them."""
    matcher = Matcher(header)
    errors = []
    assert _lib.SIGNATURES, "nothing declared"
    for name, (restype, argtypes) in sorted(_lib.SIGNATURES.items()):
        if name not in header.functions:
            errors.append(f"{name}: not in include/aclalloc.h or include/acl/*.h")
            continue
        fn = ("fn", *header.functions[name])
        errors += matcher.function_errors(restype, argtypes, fn, name)
    for name, functype in sorted(_lib.FUNCTION_POINTERS.items()):
        if name not in header.functions:
            errors.append(f"{name}: not in include/aclalloc.h or include/acl/*.h")
            continue
        fn = ("fn", *header.functions[name])
        errors += matcher.function_errors(functype._restype_, functype._argtypes_, fn, name)
    assert not errors, "\n".join(errors)


def test_declarations_are_the_live_ones() -> None:
    """What the registry holds is what ctypes uses (no declaration was
    replaced after :func:`aclalloc._lib.declare`)."""
    _import_all()
    for name, (restype, argtypes) in _lib.SIGNATURES.items():
        function = getattr(_lib.lib, name)
        assert (function.restype, tuple(function.argtypes)) == (restype, argtypes), name


def test_structures_match_the_headers(header: Header, c_layouts: Dict[str, int]) -> None:
    """Every mirrored structure: its fields by name, order and type, and its
    size, alignment and each field's offset and size as the C compiler has them."""
    matcher = Matcher(header)
    errors = []
    assert _lib.STRUCTS, "nothing mirrored"
    for name, py in sorted(_lib.STRUCTS.items()):
        if name not in header.records:
            errors.append(f"{name} ({py.__name__}): no such struct in the headers")
            continue
        kind, fields = header.records[name]
        base = ctypes.Union if kind == "union" else ctypes.Structure
        if not issubclass(py, base):
            errors.append(f"{name}: C {kind}, ctypes {py.__name__} is not a {base.__name__}")
        py_fields = [(f[0], f[1]) for f in py._fields_]
        if [f[0] for f in py_fields] != [f[0] for f in fields]:
            errors.append(
                f"{name} ({py.__name__}) fields: ctypes {[f[0] for f in py_fields]}, "
                f"C {[f[0] for f in fields]}"
            )
        for (py_name, py_type), (c_name, c_type) in zip(py_fields, fields):
            if py_name == c_name:
                errors += matcher.errors(py_type, c_type, f"{name}.{c_name}")
        for what, got, want in (
            ("sizeof", ctypes.sizeof(py), c_layouts[name]),
            ("alignment", ctypes.alignment(py), c_layouts[f"{name}@align"]),
        ):
            if got != want:
                errors.append(f"{name} ({py.__name__}): {what} {got} in ctypes, {want} in C")
        for c_name, _ in fields:
            descriptor = getattr(py, c_name, None)
            if descriptor is None:
                continue
            got = (descriptor.offset, descriptor.size)
            want = (c_layouts[f"{name}.{c_name}"], c_layouts[f"{name}.{c_name}@size"])
            if got != want:
                errors.append(f"{name}.{c_name}: (offset, size) {got} in ctypes, {want} in C")
    assert not errors, "\n".join(errors)


def _package_sources() -> List[Path]:
    return sorted(SOURCES.rglob("*.py"))


def _package_classes(base: type) -> List[type]:
    _import_all()
    found = []
    for module in pkgutil.walk_packages(aclalloc.__path__, "aclalloc."):
        for value in vars(importlib.import_module(module.name)).values():
            if isinstance(value, type) and issubclass(value, base) and value is not base:
                if value.__module__ == module.name:
                    found.append(value)
    return found


def test_every_structure_is_mirrored() -> None:
    """Each ctypes structure of the package is registered, so is checked above."""
    registered = set(_lib.STRUCTS.values())
    unregistered = [
        f"{cls.__module__}.{cls.__qualname__}"
        for cls in _package_classes(ctypes.Structure) + _package_classes(ctypes.Union)
        if cls not in registered
    ]
    assert not unregistered, f"not declared with aclalloc._lib.mirrors: {unregistered}"


def test_every_function_the_package_names_is_declared(header: Header) -> None:
    """No module sets ``argtypes``/``restype`` itself (only ``declare`` does),
    and every library function the sources name (``lib.f``, or a string that
    is a function's name, as ``getattr(lib, name)`` takes) is declared."""
    declared = set(_lib.SIGNATURES) | set(_lib.FUNCTION_POINTERS)
    errors = []
    for path in _package_sources():
        relative = path.relative_to(SOURCES.parent)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Attribute) and node.attr in ("argtypes", "restype"):
                if path.name != "_lib.py" and isinstance(node.ctx, ast.Store):
                    errors.append(f"{relative}:{node.lineno}: sets .{node.attr} itself")
            named = None
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                if node.value.id == "lib":
                    named = node.attr
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                if node.value in header.functions:
                    named = node.value
            if named is not None and named not in declared:
                errors.append(f"{relative}:{node.lineno}: {named} is not declared")
    assert not errors, "\n".join(errors)


def test_constants_match_the_headers(header: Header) -> None:
    """Every module-level int the package names like a C constant has its value."""
    _import_all()
    errors, checked = [], 0
    for module in pkgutil.walk_packages(aclalloc.__path__, "aclalloc."):
        for name, value in vars(importlib.import_module(module.name)).items():
            if name in header.constants and isinstance(value, int):
                checked += 1
                if value != header.constants[name]:
                    errors.append(f"{module.name}.{name} = {value}, C: {header.constants[name]}")
    assert checked, "no constant checked"
    assert not errors, "\n".join(errors)
