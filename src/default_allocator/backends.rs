//! Building the allocator a [`Choice`] names.

use super::{Kind, Source};
use crate::core::error::{Error, Result};
use crate::plugin::{registry, PluggableAllocator, PluginSpec};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use super::choice::Choice;

/// The allocator `choice` names, ready to serve.
pub(super) fn build(choice: &Choice) -> Result<Source> {
    match choice {
        Choice::Plugin { path, alloc, free } => plugin(path, alloc, free),
        Choice::Device => Err(Error::NotSupported {
            what: "direct device memory needs the host runtime, which this build does not have yet",
        }),
        Choice::Pool => Err(Error::NotSupported {
            what: "the caching pool is not in this build yet",
        }),
    }
}

fn plugin(path: &std::ffi::CStr, alloc: &std::ffi::CStr, free: &std::ffi::CStr) -> Result<Source> {
    let spec = PluginSpec {
        path: OsStr::from_bytes(path.to_bytes()),
        alloc,
        free,
        init: None,
        empty_cache: None,
        memory_fraction: None,
    };
    let (_handle, desc) = registry::publish(PluggableAllocator::load(&spec)?)?;
    let source = Source::from_descriptor(desc)?;
    debug_assert_eq!(source.kind, Kind::Plugin);
    Ok(source)
}
