//! Which ACL declarations go in which of CANN's headers, and the parts of
//! them CANN spells in ways cbindgen cannot: typedef'd enums, error codes as
//! `static const int`, and stream flags as `U`-suffixed macros.
//!
//! `include/acl/*.h` carry the CANN API exactly as CANN's installed headers
//! do (same include guards, same shapes), so a program on a CANN machine
//! finds CANN's first and `aclalloc.h`, which only declares the `aclalloc*`
//! extensions, compiles against either.

use crate::scan::{Constant, Scan};
use std::fmt::Write;

/// One of CANN's headers under `include/acl/`.
pub struct AclHeader {
    pub file: &'static str,
    pub guard: &'static str,
    /// Sibling headers it includes, as CANN's does.
    pub includes: &'static [&'static str],
}

pub const BASE: AclHeader = AclHeader {
    file: "acl_base.h",
    guard: "INC_EXTERNAL_ACL_ACL_BASE_H_",
    includes: &[],
};
pub const ALLOCATOR: AclHeader = AclHeader {
    file: "acl_rt_allocator.h",
    guard: "INC_EXTERNAL_ACL_ACL_RT_ALLOCATOR_H_",
    includes: &["acl_base.h"],
};
pub const RT: AclHeader = AclHeader {
    file: "acl_rt.h",
    guard: "INC_EXTERNAL_ACL_ACL_RT_H_",
    includes: &["acl_base.h", "acl_rt_allocator.h"],
};
/// Stream-ordered memory pools: CANN's programs include it directly (acl.h
/// does not), and CANN's guard is the one written here.
pub const SOMA: AclHeader = AclHeader {
    file: "acl_rt_memory_soma.h",
    guard: "INC_EXTERNAL_ACL_RT_MEMORY_H_",
    includes: &["acl_base.h", "acl_rt.h"],
};
pub const ACL: AclHeader = AclHeader {
    file: "acl.h",
    guard: "INC_EXTERNAL_ACL_ACL_H_",
    includes: &["acl_rt.h"],
};
pub const ALL: [AclHeader; 5] = [BASE, ALLOCATOR, RT, SOMA, ACL];

/// CANN's handle typedefs that live in `acl_base.h`.
const BASE_TYPES: &[&str] = &[
    "aclError",
    "aclrtStream",
    "aclrtContext",
    "aclrtEvent",
    "aclrtAllocatorDesc",
    "aclrtAllocator",
    "aclrtAllocatorBlock",
    "aclrtAllocatorAddr",
    "aclGetRecentErrMsg",
    "aclFloat16",
    "aclDataTypeSize",
    "aclFloatToFloat16",
    "aclFloat16ToFloat",
    "aclGetCannAttributeList",
    "aclGetCannAttribute",
    "aclDataBuffer",
    "aclCreateDataBuffer",
    "aclDestroyDataBuffer",
    "aclUpdateDataBuffer",
    "aclGetDataBufferAddr",
    "aclGetDataBufferSizeV2",
    "aclGetDataBufferSize",
];
/// CANN's `typedef enum X {...} X;` types that live in `acl_base.h`.
const BASE_ENUMS: &[&str] = &["aclDataType", "aclCannAttr"];
/// `acl.h`'s own functions (the rest of it is `#include "acl_rt.h"`).
const ACL_FUNCTIONS: &[&str] = &["aclInit", "aclFinalize"];
/// CANN's `typedef enum X {...} X;` types, in `acl_rt.h` (and
/// [`BASE_ENUMS`] in `acl_base.h`).
pub const ENUMS: &[&str] = &[
    "aclrtMemcpyKind",
    "aclrtMemMallocPolicy",
    "aclrtMemAttr",
    "aclrtMemLocationType",
    "aclrtMemHandleType",
    "aclrtMemAllocationType",
    "aclrtMemGranularityOptions",
    "aclrtEventStatus",
    "aclrtEventRecordedStatus",
    "aclrtEventWaitStatus",
    "aclrtStreamStatus",
    "aclrtRunMode",
    "aclrtLastErrLevel",
    "aclDataType",
    "aclrtCallbackBlockType",
    "aclrtDevResLimitType",
    "aclrtDevAttr",
    "aclrtErrorType",
    "aclrtAicoreErrorType",
    "aclrtStreamState",
    "aclrtStreamConfigAttr",
    "aclrtMemSharedHandleType",
    "aclrtMemAccessFlags",
    "aclrtIpcMemAttrType",
    "aclrtStreamAttr",
    "aclrtMemPoolAttr",
    "aclrtDeviceStatus",
    "aclCannAttr",
    "aclrtFloatOverflowMode",
    "aclrtDevFeatureType",
    "aclrtBinaryLoadOptionType",
    "aclrtEngineType",
    "aclrtLaunchKernelAttrId",
    "aclmdlRICaptureMode",
    "aclmdlRICaptureStatus",
    "aclmdlRICondHandleFlag",
    "aclmdlRICondTaskType",
    "aclrtCondition",
    "aclrtCompareDataType",
    "aclrtReduceKind",
    "aclrtRandomNumFuncType",
    "aclrtHostRegisterType",
];

/// Whether `name` is of the stream-ordered pools' header.
fn is_soma(name: &str) -> bool {
    name.starts_with("aclrtMemPool") || name.starts_with("ACL_RT_MEM_POOL_")
}

/// Whether a C name belongs to CANN's API (the rest are aclalloc's own).
pub fn is_acl(name: &str) -> bool {
    (name.starts_with("acl") && !name.starts_with("aclalloc"))
        || (name.starts_with("ACL_") && !name.starts_with("ACLALLOC_"))
}

/// The header that declares `name`, for CANN's names.
pub fn header_of(name: &str, scan: &Scan) -> Option<&'static str> {
    if !is_acl(name) {
        return None;
    }
    if is_soma(name) {
        return Some(SOMA.file);
    }
    let constant = scan.constants.iter().find(|c| c.name == name);
    Some(match constant {
        Some(c) if c.ty == "aclError" || BASE_ENUMS.contains(&c.ty.as_str()) => BASE.file,
        Some(_) => RT.file,
        None if BASE_TYPES.contains(&name) || BASE_ENUMS.contains(&name) => BASE.file,
        None if ACL_FUNCTIONS.contains(&name) => ACL.file,
        None if name.starts_with("aclrtAllocator") => ALLOCATOR.file,
        None => RT.file,
    })
}

/// Names cbindgen must leave to [`vocabulary`]: every ACL constant and the
/// enum typedefs.
pub fn written_by_hand(name: &str, scan: &Scan) -> bool {
    is_acl(name) && (ENUMS.contains(&name) || scan.constants.iter().any(|c| c.name == name))
}

/// The constants and enums of `header`, as CANN spells them.
pub fn vocabulary(header: &AclHeader, scan: &Scan) -> String {
    let mut out = String::new();
    let acl_constants = scan
        .constants
        .iter()
        .filter(|c| header_of(&c.name, scan) == Some(header.file));
    if header.file == BASE.file {
        let constants: Vec<&Constant> = acl_constants.collect();
        out.push('\n');
        for c in constants.iter().filter(|c| c.ty == "aclError") {
            let _ = writeln!(
                out,
                "{}static const int {} = {};",
                doc(&c.doc, ""),
                c.name,
                c.value
            );
        }
        write_enums(&mut out, BASE_ENUMS, &constants);
        return out;
    }
    if header.file != RT.file && header.file != SOMA.file {
        return out;
    }
    let constants: Vec<&Constant> = acl_constants.collect();
    out.push('\n');
    // How CANN spells each type of flag: hex digits at least, suffix.
    const SPELLINGS: [(&str, usize, &str); 3] = [("u64", 0, "UL"), ("i32", 8, ""), ("u32", 8, "U")];
    for c in constants.iter().filter(|c| !ENUMS.contains(&c.ty.as_str())) {
        assert!(
            SPELLINGS.iter().any(|(ty, ..)| *ty == c.ty) && c.value >= 0,
            "build.rs does not know how CANN spells the constant {} of type {}: \
             add it to buildscript/acl_headers.rs",
            c.name,
            c.ty
        );
    }
    // One type after the other, in the order CANN's headers list them.
    for (ty, digits, suffix) in SPELLINGS {
        for c in constants.iter().filter(|c| c.ty == ty) {
            let _ = writeln!(
                out,
                "{}#define {} 0x{:0digits$X}{suffix}",
                doc(&c.doc, ""),
                c.name,
                c.value
            );
        }
    }
    write_enums(&mut out, ENUMS, &constants);
    out
}

/// Each enum of `enums` that has constants among `constants` (those of
/// one header), as CANN spells it.
fn write_enums(out: &mut String, enums: &[&str], constants: &[&Constant]) {
    for ty in enums
        .iter()
        .filter(|ty| constants.iter().any(|c| c.ty == **ty))
    {
        let _ = writeln!(out, "\ntypedef enum {ty} {{");
        for c in constants.iter().filter(|c| c.ty == *ty) {
            let _ = writeln!(out, "{}    {} = {},", doc(&c.doc, "    "), c.name, value(c));
        }
        let _ = writeln!(out, "}} {ty};");
    }
}

fn value(c: &Constant) -> String {
    if c.value >= 0x100 {
        format!("0x{:X}", c.value)
    } else {
        c.value.to_string()
    }
}

fn doc(text: &str, indent: &str) -> String {
    if text.is_empty() {
        String::new()
    } else {
        format!("{indent}/** {text} */\n")
    }
}
