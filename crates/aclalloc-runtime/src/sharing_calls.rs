//! CANN's calls for sharing memory between processes on the host runtime:
//! shareable handles of physical memory, IPC memory keys, access flags.
//! Every one goes through the one rendezvous of [`super::sharing`].

use super::host::HostRuntime;
use super::sharing::{self, Kind};
use super::virtual_memory::{invalid, virtual_memory};
use crate::base::error::{Error, Result};
use crate::base::types::{
    aclrtMemLocation, ACL_MEM_HANDLE_TYPE_NONE, ACL_MEM_LOCATION_TYPE_DEVICE,
};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::os::fd::AsRawFd;

/// Export flag: anyone may import (CANN's `..._DISABLE_PID_VALIDATION`,
/// bit 0 for physical and IPC memory).
const NO_PID_CHECK: u64 = 0x1;
/// Access flags (`aclrtMemAccessFlags`).
const ACCESS_NONE: u64 = 0x0;
const ACCESS_READ: u64 = 0x1;
const ACCESS_READWRITE: u64 = 0x3;

/// IPC memory this process imported: key handle → (address given out,
/// start of its mapping, imports not yet closed).
type Imports = HashMap<u64, (usize, usize, usize)>;
static IMPORTED: Mutex<Option<Imports>> = Mutex::new(None);
/// Access flags set with `aclrtMemSetAccess`: (mapping address, device) → flags.
static ACCESS: Mutex<Option<HashMap<(usize, u32), u64>>> = Mutex::new(None);

fn pid_flags(flags: u64) -> Result<bool> {
    match flags {
        0 => Ok(true),
        NO_PID_CHECK => Ok(false),
        _ => Err(invalid(
            "flags",
            "It must be the default (0) or DISABLE_PID_VALIDATION (0x1)",
        )),
    }
}

impl HostRuntime {
    /// `aclrtMemExportToShareableHandle(V2)`: a handle another process
    /// imports the same pages with. `handle_type` must be
    /// `ACL_MEM_HANDLE_TYPE_NONE`.
    pub fn export_physical(&self, handle: usize, handle_type: i32, flags: u64) -> Result<u64> {
        let (fd, size, device) = virtual_memory().share(handle)?;
        if handle_type != ACL_MEM_HANDLE_TYPE_NONE {
            return Err(invalid(
                "handleType",
                "It is reserved and must be ACL_MEM_HANDLE_TYPE_NONE",
            ));
        }
        let validate = pid_flags(flags)?;
        sharing::export(Kind::Physical, handle, fd, size, 0, device, validate)
    }

    /// `aclrtMemSetPidToShareableHandle(V2)`.
    pub fn allow_physical_import(&self, shareable: u64, pids: &[i32]) -> Result<()> {
        check_pids(pids)?;
        sharing::allow(Kind::Physical, shareable, pids, "shareableHandle")
    }

    /// `aclrtMemImportFromShareableHandle(V2)`: this process's handle of the
    /// memory, on `device`. Only another process's export imports.
    pub fn import_physical(&self, shareable: u64, device: i32) -> Result<usize> {
        let device = self.device(device)?.memory().device();
        if sharing::exporter_of(shareable) == std::process::id() {
            return Err(invalid(
                "shareableHandle",
                "It was exported by this process: a shareable handle is imported by another process",
            ));
        }
        let got = sharing::import(Kind::Physical, shareable, "shareableHandle")?;
        Ok(virtual_memory().adopt(device, got.len, got.fd))
    }

    /// Ends the export of physical `handle`, if any: `aclrtFreePhysical`
    /// destroys its shareable handle; importers keep their memory.
    pub(crate) fn unshare_physical(&self, handle: usize) {
        if let Some(shared) = sharing::handle_of(Kind::Physical, handle) {
            sharing::withdraw(Kind::Physical, shared);
        }
    }

    /// `aclrtIpcMemGetExportKey`: the key of the `aclrtMalloc` allocation
    /// holding `[ptr, ptr + size)`. Its pages become shared memory (the
    /// contents are kept) once the streams have run the work queued before;
    /// no other thread may write it during the call.
    pub fn ipc_export(&self, ptr: usize, size: usize, flags: u64) -> Result<String> {
        if size == 0 {
            return Err(invalid("size", "It must be greater than 0"));
        }
        let validate = pid_flags(flags)?;
        let (device, start, mapped) = self
            .devices()?
            .iter()
            .find_map(|d| {
                let (start, mapped) = d.memory().region(ptr, size)?;
                Some((d.memory().device(), start, mapped))
            })
            .ok_or(invalid(
                "devPtr",
                "The range is not inside one live allocation of aclrtMalloc",
            ))?;
        if sharing::handle_of(Kind::IpcMemory, start).is_some() {
            return Err(invalid(
                "devPtr",
                "The allocation is already exported: close its key with aclrtIpcMemClose first",
            ));
        }
        // Work queued before may still write the pages about to be moved.
        self.synchronize_all()?;
        let fd = sharing::memfd(c"aclalloc-ipc", mapped)?;
        make_shared(start, mapped, fd.as_raw_fd())?;
        let handle = sharing::export(
            Kind::IpcMemory,
            start,
            fd,
            mapped,
            ptr - start,
            device,
            validate,
        )?;
        Ok(sharing::key_of(handle))
    }

    /// `aclrtIpcMemSetAttr`: `kind` `ACL_RT_IPC_MEM_ATTR_ACCESS_LINK` (0) with
    /// one of its links (0 to 3), for a key this process exported. The
    /// host has one memory and no links between dies: a valid attribute
    /// changes nothing.
    pub fn ipc_set_attr(&self, key: &str, kind: i32, attr: u64) -> Result<()> {
        let handle = sharing::handle_of_key(key).ok_or(NOT_A_KEY)?;
        if kind != 0 {
            return Err(invalid(
                "type",
                "It must be ACL_RT_IPC_MEM_ATTR_ACCESS_LINK",
            ));
        }
        if attr > 3 {
            return Err(invalid(
                "attr",
                "It must be an ACL_RT_IPC_MEM_ATTR_ACCESS_LINK_* value (0 to 3)",
            ));
        }
        if !sharing::is_exported(Kind::IpcMemory, handle) {
            return Err(invalid(
                "key",
                "It is not a key this process exported with aclrtIpcMemGetExportKey (or it was closed)",
            ));
        }
        Ok(())
    }

    /// `aclrtIpcMemSetImportPid`.
    pub fn ipc_allow_import(&self, key: &str, pids: &[i32]) -> Result<()> {
        check_pids(pids)?;
        let handle = sharing::handle_of_key(key).ok_or(NOT_A_KEY)?;
        sharing::allow(Kind::IpcMemory, handle, pids, "key")
    }

    /// `aclrtIpcMemImportByKey`: the exported memory at an address of this
    /// process (a second import of a key gives the same address).
    pub fn ipc_import(&self, key: &str, flags: u64) -> Result<usize> {
        if flags > 1 {
            return Err(invalid(
                "flags",
                "It must be ACL_RT_IPC_MEM_IMPORT_FLAG_DEFAULT or ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS",
            ));
        }
        let handle = sharing::handle_of_key(key).ok_or(NOT_A_KEY)?;
        let mut imported = IMPORTED.lock();
        let imported = imported.get_or_insert_with(HashMap::new);
        if let Some((addr, _, count)) = imported.get_mut(&handle) {
            *count += 1;
            return Ok(*addr);
        }
        let got = sharing::import(Kind::IpcMemory, handle, "key")?;
        let start = virtual_memory().map_foreign(got.fd, got.len, got.device)?;
        imported.insert(handle, (start + got.offset, start, 1));
        Ok(start + got.offset)
    }

    /// `aclrtIpcMemClose`: in an importer, unmaps the memory at its last
    /// close, once the streams have run the work queued before; in the exporter, ends the export (the memory stays this
    /// process's until `aclrtFree`).
    pub fn ipc_close(&self, key: &str) -> Result<()> {
        let handle = sharing::handle_of_key(key).ok_or(NOT_A_KEY)?;
        let mut imported = IMPORTED.lock();
        let imported = imported.get_or_insert_with(HashMap::new);
        if let Some((_, start, count)) = imported.get_mut(&handle) {
            *count -= 1;
            if *count == 0 {
                // As aclrtFree: work already queued may still use the memory.
                self.synchronize_all()?;
                let start = *start;
                imported.remove(&handle);
                virtual_memory().unmap_foreign(start)?;
            }
            return Ok(());
        }
        sharing::withdraw(Kind::IpcMemory, handle)
            .map(drop)
            .ok_or(invalid(
                "key",
                "It is neither imported nor exported by this process (or it was already closed)",
            ))
    }

    /// `aclrtMemSetAccess`: records the access of each device to the mapped
    /// range (the host maps it read-write for every device).
    pub fn set_access(
        &self,
        ptr: usize,
        size: usize,
        descs: &[(u64, aclrtMemLocation)],
    ) -> Result<()> {
        if size == 0 {
            return Err(invalid("size", "It must be greater than 0"));
        }
        if descs.is_empty() {
            return Err(invalid("count", "It must be at least 1"));
        }
        if virtual_memory().lookup(ptr, size) != super::memory::Lookup::Inside {
            return Err(invalid(
                "virPtr",
                "The range is not mapped memory (aclrtMapMem)",
            ));
        }
        let mut checked = Vec::with_capacity(descs.len());
        for &(flags, location) in descs {
            let device = self.access_location(location, "desc")?;
            if ![ACCESS_NONE, ACCESS_READ, ACCESS_READWRITE].contains(&flags) {
                return Err(invalid("desc", "flags is not an aclrtMemAccessFlags value"));
            }
            checked.push(((ptr, device), flags));
        }
        ACCESS
            .lock()
            .get_or_insert_with(HashMap::new)
            .extend(checked);
        Ok(())
    }

    /// `aclrtMemGetAccess`: the flags last set for `location` on the range
    /// starting at `ptr` (read-write when never set: the host's mapping).
    pub fn get_access(&self, ptr: usize, location: aclrtMemLocation) -> Result<u64> {
        let device = self.access_location(location, "location")?;
        if virtual_memory().lookup(ptr, 1) != super::memory::Lookup::Inside {
            return Err(invalid("virPtr", "It is not mapped memory (aclrtMapMem)"));
        }
        let access = ACCESS.lock();
        let set = access.as_ref().and_then(|a| a.get(&(ptr, device)));
        Ok(set.copied().unwrap_or(ACCESS_READWRITE))
    }

    fn access_location(&self, location: aclrtMemLocation, param: &'static str) -> Result<u32> {
        if location.r#type != ACL_MEM_LOCATION_TYPE_DEVICE {
            return Err(invalid(
                param,
                "location.type must be ACL_MEM_LOCATION_TYPE_DEVICE",
            ));
        }
        let id = i32::try_from(location.id).unwrap_or(i32::MAX);
        Ok(self.device(id)?.memory().device())
    }
}

const NOT_A_KEY: Error = Error::InvalidParam {
    param: "key",
    reason: "It is not a key returned by an export call",
};

fn check_pids(pids: &[i32]) -> Result<()> {
    if pids.is_empty() {
        return Err(invalid("pidNum", "It must be at least 1"));
    }
    if pids.iter().any(|&p| p <= 0) {
        return Err(invalid("pid", "Every pid must be greater than 0"));
    }
    Ok(())
}

/// Puts `fd` (a memfd of `len` bytes) under `[start, start + len)` with the
/// range's contents: pages never touched stay holes in the file.
fn make_shared(start: usize, len: usize, fd: i32) -> Result<()> {
    let failed = Error::Failure {
        reason: "The host refused to move the allocation into shared memory",
    };
    const PAGE: usize = 4096;
    for at in (0..len).step_by(PAGE) {
        let n = PAGE.min(len - at);
        // SAFETY: the range is a live read-write allocation of this process.
        let page = unsafe { std::slice::from_raw_parts((start + at) as *const u8, n) };
        if page.iter().any(|&b| b != 0) {
            // SAFETY: `page` is readable for `n` bytes; the file is `len` long.
            let wrote = unsafe { libc::pwrite(fd, page.as_ptr().cast(), n, at as libc::off_t) };
            if wrote != n as isize {
                return Err(failed);
            }
        }
    }
    // SAFETY: replaces the allocation's own pages, whose contents the file
    // now holds, with the file (the kernel swaps the mapping atomically).
    let p = unsafe {
        libc::mmap(
            start as *mut _,
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_FIXED,
            fd,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(failed);
    }
    Ok(())
}
