//! Loading a plugin's shared object and resolving its functions by name.

use super::text;
use crate::base::error::{Error, Result};
use std::ffi::{c_void, CStr, OsStr};
use std::sync::Arc;

/// `void *alloc(ssize_t size, int device, aclrtStream stream)` (torch_npu's).
pub type PluginAllocFn =
    unsafe extern "C" fn(size: isize, device: i32, stream: *mut c_void) -> *mut c_void;
/// `void free(void *ptr, ssize_t size, int device, aclrtStream stream)` (torch_npu's).
pub type PluginFreeFn =
    unsafe extern "C" fn(ptr: *mut c_void, size: isize, device: i32, stream: *mut c_void);
/// `void init(int device_count)`.
pub type PluginInitFn = unsafe extern "C" fn(device_count: i32);
/// `void empty_cache(void)`.
pub type PluginEmptyCacheFn = unsafe extern "C" fn();
/// `void set_memory_fraction(double fraction, int device)`.
pub type PluginMemoryFractionFn = unsafe extern "C" fn(fraction: f64, device: i32);

/// The functions of a pluggable allocator.
#[derive(Clone, Copy)]
pub struct PluginFunctions {
    /// Allocates.
    pub alloc: PluginAllocFn,
    /// Frees.
    pub free: PluginFreeFn,
    /// Called once, when the allocator is created.
    pub init: Option<PluginInitFn>,
    /// Returns cached memory to the device.
    pub empty_cache: Option<PluginEmptyCacheFn>,
    /// Limits the memory the allocator may take on a device.
    pub memory_fraction: Option<PluginMemoryFractionFn>,
}

/// Where a plugin is and which symbols are its functions.
#[derive(Clone, Copy, Debug)]
pub struct PluginSpec<'a> {
    /// The shared object, as `dlopen` takes it (a name without '/' is looked
    /// up on the loader's search path).
    pub path: &'a OsStr,
    /// The alloc symbol.
    pub alloc: &'a CStr,
    /// The free symbol.
    pub free: &'a CStr,
    /// The init symbol, if any.
    pub init: Option<&'a CStr>,
    /// The empty-cache symbol, if any.
    pub empty_cache: Option<&'a CStr>,
    /// The memory-fraction symbol, if any.
    pub memory_fraction: Option<&'a CStr>,
}

/// A loaded shared object. It stays loaded while anything holds it.
pub struct Loaded {
    // Declared for its Drop (dlclose); the functions above point into it.
    _library: libloading::Library,
}

/// Opens the shared object and resolves every named symbol; on any failure
/// the object is closed again and nothing is kept.
pub fn load(spec: &PluginSpec<'_>) -> Result<(PluginFunctions, Arc<Loaded>)> {
    // RTLD_NOW: an unresolved reference inside the plugin fails here, with
    // the loader's text, and not in the middle of a launch.
    let flags = libloading::os::unix::RTLD_NOW | libloading::os::unix::RTLD_LOCAL;
    // SAFETY: loading runs the object's initialisers; choosing to load this
    // object is the caller's decision, as with dlopen.
    let library =
        unsafe { libloading::os::unix::Library::open(Some(spec.path), flags) }.map_err(|e| {
            Error::LibraryLoad {
                detail: text::keep(&e.to_string()),
            }
        })?;
    let library = libloading::Library::from(library);
    let functions = PluginFunctions {
        alloc: symbol(&library, spec.alloc, "allocSymbol")?,
        free: symbol(&library, spec.free, "freeSymbol")?,
        init: spec
            .init
            .map(|s| symbol(&library, s, "initSymbol"))
            .transpose()?,
        empty_cache: spec
            .empty_cache
            .map(|s| symbol(&library, s, "emptyCacheSymbol"))
            .transpose()?,
        memory_fraction: spec
            .memory_fraction
            .map(|s| symbol(&library, s, "memoryFractionSymbol"))
            .transpose()?,
    };
    Ok((functions, Arc::new(Loaded { _library: library })))
}

/// Resolves `name` as a function of type `F` (a function pointer type).
fn symbol<F: Copy>(library: &libloading::Library, name: &CStr, param: &'static str) -> Result<F> {
    const { assert!(std::mem::size_of::<F>() == std::mem::size_of::<*mut c_void>()) };
    // SAFETY: reading the symbol's address as a data pointer is always valid.
    let address = unsafe { library.get::<*mut c_void>(name.to_bytes_with_nul()) }
        .map(|s| *s)
        .map_err(|e| Error::SymbolMissing {
            param,
            detail: text::keep(&e.to_string()),
        })?;
    if address.is_null() {
        return Err(Error::SymbolMissing {
            param,
            detail: "the symbol resolves to NULL",
        });
    }
    // SAFETY: F is a function pointer type of pointer size (checked above);
    // that the symbol has F's signature is the caller's documented contract,
    // and it is called only while `Loaded` keeps the object mapped.
    Ok(unsafe { std::mem::transmute_copy::<*mut c_void, F>(&address) })
}
