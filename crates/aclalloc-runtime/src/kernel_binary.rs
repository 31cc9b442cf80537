//! Kernel binaries on the host runtime (`aclrtBinaryLoadFromFile`,
//! `aclrtBinaryGetFunction`, `aclrtBinaryUnLoad`).
//!
//! A kernel binary for the host is a shared object of host stand-ins: for
//! kernel `NAME` it exports `aclallocKernel_NAME` with the signature of
//! `aclallocKernelStandIn` (`base::types`), called once per block with the
//! argument list as CANN lays it out (`kernel_args.rs`). The object
//! is opened with `RTLD_NOW | RTLD_LOCAL`, so two binaries may define the
//! same kernel names.
//!
//! Unloading: the binary's handle, its functions' handles and their
//! argument lists die at once (a later call with them fails, naming the
//! handle); launches already queued keep the object mapped until they have
//! run, so unloading never pulls code from under a stream. The shared
//! object is closed when the last of them retires.

use super::host::HostRuntime;
use super::kernel_args;
use crate::base::env::Interned;
use crate::base::error::{Error, Result};
use crate::base::handles::HandleTable;
use crate::base::ids::{BinaryHandle, FunctionHandle, KernelArgsHandle};
use crate::base::types::aclallocKernelBlock;
use std::ffi::c_void;
use std::sync::{Arc, LazyLock};

/// A stand-in as the stream worker calls it (`foreign_call::kernel`'s
/// type): `aclallocKernelStandIn`'s ABI, the block passed as a pointer.
pub(crate) type StandIn = unsafe extern "C" fn(*mut c_void, usize, *mut c_void);

/// The prefix of a stand-in's symbol: `aclallocKernel_` + the kernel's name.
pub const STAND_IN_PREFIX: &str = "aclallocKernel_";

/// A loaded binary: the object, and the handles that die with it.
pub(crate) struct Binary {
    library: Arc<libloading::Library>,
    /// The functions found in it so far, by kernel name.
    functions: Vec<(String, FunctionHandle)>,
    /// The argument lists made for its functions.
    pub(crate) args: Vec<KernelArgsHandle>,
}

/// A kernel of a loaded binary.
#[derive(Clone)]
pub(crate) struct Function {
    pub(crate) binary: BinaryHandle,
    pub(crate) entry: StandIn,
    /// Keeps the object mapped for launches queued with this function.
    pub(crate) library: Arc<libloading::Library>,
}

pub(crate) static BINARIES: LazyLock<HandleTable<BinaryHandle, Binary>> =
    LazyLock::new(HandleTable::new);
pub(crate) static FUNCTIONS: LazyLock<HandleTable<FunctionHandle, Function>> =
    LazyLock::new(HandleTable::new);

pub(crate) const NOT_A_BINARY: Error = Error::InvalidParam {
    param: "binHandle",
    reason: "It is not a live kernel binary (it was not returned by aclrtBinaryLoadFromFile, or it was unloaded)",
};
pub(crate) const NOT_A_FUNCTION: Error = Error::InvalidParam {
    param: "funcHandle",
    reason: "It is not a live kernel function (it was not returned by aclrtBinaryGetFunction, or its binary was unloaded)",
};

/// A `'static` copy of a loader's or a kernel's text for an error.
fn keep(text: &str) -> &'static str {
    static TEXTS: Interned<str> = Interned::new(64);
    TEXTS
        .get(text, |t| Box::leak(t.into()))
        .unwrap_or("(the message was not kept: too many distinct kernel binary failures)")
}

/// The function behind `handle`, cloned out of its table.
pub(crate) fn function(handle: FunctionHandle) -> Result<Function> {
    FUNCTIONS
        .with(handle, Function::clone)
        .ok_or(NOT_A_FUNCTION)
}

impl HostRuntime {
    /// `aclrtBinaryLoadFromFile`: opens the kernel binary at `path` (a path
    /// without a slash is taken relative to the working directory, as a
    /// file name, never searched for on the library path).
    pub fn binary_load_from_file(&self, path: &std::ffi::CStr) -> Result<BinaryHandle> {
        if path.is_empty() {
            return Err(Error::InvalidParam {
                param: "binPath",
                reason: "It is empty",
            });
        }
        use std::os::unix::ffi::OsStrExt;
        let bytes = path.to_bytes();
        let mut file = Vec::with_capacity(bytes.len() + 2);
        if !bytes.contains(&b'/') {
            file.extend_from_slice(b"./");
        }
        file.extend_from_slice(bytes);
        let file = std::ffi::OsStr::from_bytes(&file);
        let flags = libloading::os::unix::RTLD_NOW | libloading::os::unix::RTLD_LOCAL;
        // SAFETY: loading runs the object's initialisers; the program chose
        // to load this binary, as with CANN's loader.
        let library =
            unsafe { libloading::os::unix::Library::open(Some(file), flags) }.map_err(|e| {
                Error::BinaryLoad {
                    detail: keep(&e.to_string()),
                }
            })?;
        BINARIES.insert(Binary {
            library: Arc::new(library.into()),
            functions: Vec::new(),
            args: Vec::new(),
        })
    }

    /// `aclrtBinaryGetFunction`: the stand-in of `kernel_name` in `binary`
    /// (the same handle each time for one name).
    pub fn binary_get_function(
        &self,
        binary: BinaryHandle,
        kernel_name: &std::ffi::CStr,
    ) -> Result<FunctionHandle> {
        let name = kernel_name.to_str().map_err(|_| Error::InvalidParam {
            param: "kernelName",
            reason: "It is not valid UTF-8",
        })?;
        let (library, known) = BINARIES
            .with(binary, |b| {
                let known = b.functions.iter().find(|(n, _)| n == name).map(|f| f.1);
                (Arc::clone(&b.library), known)
            })
            .ok_or(NOT_A_BINARY)?;
        if let Some(handle) = known {
            return Ok(handle);
        }
        let symbol = format!("{STAND_IN_PREFIX}{name}\0");
        // SAFETY: the symbol is declared with `aclallocKernelStandIn`'s
        // type, as the stand-in ABI requires of a kernel binary.
        let entry = unsafe { library.get::<StandIn>(symbol.as_bytes()) }
            .map(|s| *s)
            .map_err(|_| Error::InvalidParam {
                param: "kernelName",
                reason: keep(&format!(
                    "The kernel binary has no kernel {name} (no host stand-in {STAND_IN_PREFIX}{name} in it)"
                )),
            })?;
        let handle = FUNCTIONS.insert(Function {
            binary,
            entry,
            library,
        })?;
        let recorded = BINARIES.with_mut(binary, |b| {
            // Another thread may have found the same name meanwhile.
            match b.functions.iter().find(|(n, _)| n == name) {
                Some(&(_, earlier)) => Err(earlier),
                None => {
                    b.functions.push((name.to_owned(), handle));
                    Ok(handle)
                }
            }
        });
        match recorded {
            Some(Ok(handle)) => Ok(handle),
            Some(Err(earlier)) => {
                FUNCTIONS.remove(handle);
                Ok(earlier)
            }
            None => {
                // Unloaded while we looked.
                FUNCTIONS.remove(handle);
                Err(NOT_A_BINARY)
            }
        }
    }

    /// `aclrtBinaryUnLoad`: the binary's handles die now; queued launches
    /// keep its object mapped until they have run (see the module doc).
    pub fn binary_unload(&self, binary: BinaryHandle) -> Result<()> {
        let removed = BINARIES.remove(binary).ok_or(NOT_A_BINARY)?;
        for (_, function) in &removed.functions {
            FUNCTIONS.remove(*function);
        }
        for args in &removed.args {
            kernel_args::forget(*args);
        }
        Ok(())
    }
}

/// One block's call of a stand-in: what the stream worker passes it.
pub(crate) fn block(index: u32, count: u32) -> aclallocKernelBlock {
    aclallocKernelBlock {
        blockIdx: index,
        numBlocks: count,
    }
}
