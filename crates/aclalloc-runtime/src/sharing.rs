//! Handing memory (and notifies, IPC events) to other processes on the same host: the
//! one rendezvous behind shareable handles, IPC memory keys and notify keys.
//!
//! What is shared is always a file descriptor of a `memfd`: physical memory
//! is one already, IPC memory and notifies are moved into one when exported.
//! The exporting process keeps a table of its exports and answers requests
//! on an abstract Unix socket named after its pid, from a thread started at
//! its first export; the descriptor travels with `SCM_RIGHTS`.
//!
//! Why a socket and not files in a directory: the kernel names the peer
//! (`SO_PEERCRED`), so the pid whitelist is checked on the exporter's side
//! against a pid nobody can forge, and an abstract name and the descriptors
//! in flight vanish with their process: nothing is left behind by a process
//! that is killed, nothing is to clean. An importer holds its own
//! descriptor and mapping, so the exporter exiting first takes nothing from
//! it; the pages go with the last process that maps them.
//!
//! A handle is `pid << 42 | token`, `token` 42 random bits drawn per export:
//! a made-up handle, or one of another run of the same pid, names no export
//! and is refused.

use crate::base::error::{Error, Result};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::sync::Arc;
use std::time::Duration;

const TOKEN_BITS: u32 = 42;
const TOKEN_MASK: u64 = (1 << TOKEN_BITS) - 1;
/// How long an importer waits for an exporter's answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

/// What an export is, so a key of one kind cannot import another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Physical memory (`aclrtMemExportToShareableHandle`).
    Physical = 1,
    /// Device memory (`aclrtIpcMemGetExportKey`).
    IpcMemory = 2,
    /// A notify (`aclrtNotifyGetExportKey`).
    Notify = 3,
    /// An IPC event (`aclrtIpcGetEventHandle`).
    Event = 4,
}

/// One export of this process.
struct Export {
    kind: Kind,
    fd: Arc<OwnedFd>,
    len: usize,
    offset: usize,
    device: u32,
    /// What was exported (a physical id, an address, a notify handle), so
    /// it is exported once and can be withdrawn by it.
    source: usize,
    validate: bool,
    pids: Vec<i32>,
}

/// What an importer receives.
pub struct Received {
    /// The shared memory.
    pub fd: OwnedFd,
    /// Its length.
    pub len: usize,
    /// Where the exported range starts inside it.
    pub offset: usize,
    /// The exporter's device.
    pub device: u32,
}

#[derive(Default)]
struct Exports {
    /// The pid the table and the socket belong to (a child of `fork()`
    /// answers under its own pid with its own thread).
    pid: u32,
    listening: bool,
    by_handle: HashMap<u64, Export>,
}

static EXPORTS: Mutex<Option<Exports>> = Mutex::new(None);

fn pid() -> u32 {
    std::process::id()
}

fn socket_name(pid: u32) -> String {
    format!("aclalloc-share.{pid}")
}

/// A new handle of this process: its pid and a random token.
fn new_handle() -> Result<u64> {
    loop {
        let mut bytes = [0u8; 8];
        // SAFETY: a writable buffer of its own length.
        let n = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
        if n != bytes.len() as isize {
            return Err(Error::Failure {
                reason: "The host refused random bytes for a shareable handle",
            });
        }
        let token = u64::from_ne_bytes(bytes) & TOKEN_MASK;
        if token != 0 {
            return Ok((u64::from(pid()) << TOKEN_BITS) | token);
        }
    }
}

/// The pid a handle names.
pub fn exporter_of(handle: u64) -> u32 {
    (handle >> TOKEN_BITS) as u32
}

/// Runs `f` on this process's table (a fresh one after `fork()`).
fn with_exports<R>(f: impl FnOnce(&mut Exports) -> R) -> R {
    let mut guard = EXPORTS.lock();
    let exports = guard.get_or_insert_with(Exports::default);
    if exports.pid != pid() {
        *exports = Exports {
            pid: pid(),
            ..Exports::default()
        };
    }
    f(exports)
}

fn listen() -> Result<()> {
    let failed = Error::Failure {
        reason: "The host refused the socket that answers imports of this process's exports",
    };
    let addr = SocketAddr::from_abstract_name(socket_name(pid())).map_err(|_| failed)?;
    let listener = UnixListener::bind_addr(&addr).map_err(|_| failed)?;
    crate::base::threads::spawn("aclalloc-share".into(), move || serve(listener))
        .map_err(|_| failed)?;
    Ok(())
}

/// Records an export of `fd` and returns its handle. A `source` already
/// exported as `kind` is refused (CANN: one handle per allocation).
pub fn export(
    kind: Kind,
    source: usize,
    fd: OwnedFd,
    len: usize,
    offset: usize,
    device: u32,
    validate: bool,
) -> Result<u64> {
    let handle = new_handle()?;
    with_exports(|exports| {
        if exports
            .by_handle
            .values()
            .any(|e| e.kind == kind && e.source == source)
        {
            return Err(Error::InvalidParam {
                param: "handle",
                reason: "It is already exported: an allocation has one shareable handle",
            });
        }
        if !exports.listening {
            listen()?;
            exports.listening = true;
        }
        exports.by_handle.insert(
            handle,
            Export {
                kind,
                fd: Arc::new(fd),
                len,
                offset,
                device,
                source,
                validate,
                pids: Vec::new(),
            },
        );
        Ok(handle)
    })
}

const NOT_EXPORTED: &str =
    "It is not a live export of this process (made up, from another run, or already closed)";

/// Adds `pids` to the whitelist of this process's export `handle` of `kind`.
pub fn allow(kind: Kind, handle: u64, pids: &[i32], param: &'static str) -> Result<()> {
    with_exports(|exports| {
        let e = exports
            .by_handle
            .get_mut(&handle)
            .filter(|e| e.kind == kind)
            .ok_or(Error::InvalidParam {
                param,
                reason: NOT_EXPORTED,
            })?;
        e.pids.extend_from_slice(pids);
        Ok(())
    })
}

/// The handle of this process's export of `source` as `kind`, if any.
pub fn handle_of(kind: Kind, source: usize) -> Option<u64> {
    with_exports(|exports| {
        exports
            .by_handle
            .iter()
            .find(|(_, e)| e.kind == kind && e.source == source)
            .map(|(&h, _)| h)
    })
}

/// Ends this process's export `handle` of `kind`: later imports are refused,
/// processes that imported it keep their memory. Returns what was exported.
pub fn withdraw(kind: Kind, handle: u64) -> Option<usize> {
    with_exports(|exports| {
        let e = exports.by_handle.get(&handle).filter(|e| e.kind == kind)?;
        let source = e.source;
        exports.by_handle.remove(&handle);
        Some(source)
    })
}

/// Whether `handle` is a live export of this process, of `kind`.
pub fn is_exported(kind: Kind, handle: u64) -> bool {
    with_exports(|exports| {
        exports
            .by_handle
            .get(&handle)
            .is_some_and(|e| e.kind == kind)
    })
}

/// Live exports of this process (for tests).
pub fn live_exports() -> usize {
    with_exports(|exports| exports.by_handle.len())
}

// The wire: a request is (handle u64, kind u32, 0 u32); an answer is
// (status u32, device u32, len u64, offset u64) with the descriptor attached
// on success.
const OK: u32 = 0;
const UNKNOWN: u32 = 1;
const REFUSED: u32 = 2;

fn serve(listener: UnixListener) {
    for conn in listener.incoming() {
        let Ok(mut conn) = conn else { continue };
        // A client that stalls cannot hold up the others for long.
        let _ = conn.set_read_timeout(Some(Duration::from_secs(1)));
        let _ = conn.set_write_timeout(Some(Duration::from_secs(1)));
        let mut request = [0u8; 16];
        if conn.read_exact(&mut request).is_err() {
            continue;
        }
        let handle = u64::from_ne_bytes(request[..8].try_into().unwrap_or_default());
        let kind = u32::from_ne_bytes(request[8..12].try_into().unwrap_or_default());
        let peer = peer_pid(&conn);
        let found = with_exports(|exports| {
            let e = exports
                .by_handle
                .get(&handle)
                .filter(|e| e.kind as u32 == kind);
            match e {
                None => Err(UNKNOWN),
                Some(e) if e.validate && !peer.is_some_and(|p| e.pids.contains(&p)) => Err(REFUSED),
                Some(e) => Ok((Arc::clone(&e.fd), e.device, e.len, e.offset)),
            }
        });
        let _ = match found {
            Ok((fd, device, len, offset)) => {
                answer(&conn, OK, device, len, offset, Some(fd.as_raw_fd()))
            }
            Err(status) => answer(&conn, status, 0, 0, 0, None),
        };
    }
}

/// The pid of the process at the other end, as the kernel knows it.
fn peer_pid(conn: &UnixStream) -> Option<i32> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid for the option's size.
    let rc = unsafe {
        libc::getsockopt(
            conn.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&raw mut cred).cast(),
            &mut len,
        )
    };
    (rc == 0).then_some(cred.pid)
}

fn answer(
    conn: &UnixStream,
    status: u32,
    device: u32,
    len: usize,
    offset: usize,
    fd: Option<RawFd>,
) -> std::io::Result<()> {
    let mut body = [0u8; 24];
    body[..4].copy_from_slice(&status.to_ne_bytes());
    body[4..8].copy_from_slice(&device.to_ne_bytes());
    body[8..16].copy_from_slice(&(len as u64).to_ne_bytes());
    body[16..].copy_from_slice(&(offset as u64).to_ne_bytes());
    let mut iov = libc::iovec {
        iov_base: body.as_mut_ptr().cast(),
        iov_len: body.len(),
    };
    let mut control = [0u64; 4];
    // SAFETY: msghdr is plain data; every field used is set below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if let Some(fd) = fd {
        // SAFETY: CMSG_SPACE only computes a size.
        let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) } as usize;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space;
        // SAFETY: the control buffer holds `space` bytes (32 >= one fd's
        // header and data), so the first header exists and fits.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as usize;
            libc::CMSG_DATA(cmsg).cast::<RawFd>().write_unaligned(fd);
        }
    }
    // SAFETY: `msg` points to live buffers for the call.
    let n =
        retry_interrupted(|| unsafe { libc::sendmsg(conn.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) });
    if n == body.len() as isize {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Asks the exporter of `handle` for it. Refusals: a handle naming no live
/// export of a live process (`param` invalid), a whitelist without this
/// process (`NoPermission`).
pub fn import(kind: Kind, handle: u64, param: &'static str) -> Result<Received> {
    let unknown = Error::InvalidParam {
        param,
        reason: "It names no live export: made up, from another run, closed, or its exporting process has exited",
    };
    let exporter = exporter_of(handle);
    if exporter == 0 || handle & TOKEN_MASK == 0 {
        return Err(unknown);
    }
    let addr = SocketAddr::from_abstract_name(socket_name(exporter)).map_err(|_| unknown)?;
    let mut conn = loop {
        match UnixStream::connect_addr(&addr) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            other => break other.map_err(|_| unknown)?,
        }
    };
    let _ = conn.set_read_timeout(Some(ANSWER_TIMEOUT));
    let _ = conn.set_write_timeout(Some(ANSWER_TIMEOUT));
    let mut request = [0u8; 16];
    request[..8].copy_from_slice(&handle.to_ne_bytes());
    request[8..12].copy_from_slice(&(kind as u32).to_ne_bytes());
    conn.write_all(&request).map_err(|_| unknown)?;
    let (body, fd) = receive(&conn).ok_or(unknown)?;
    let word = |at: usize| u64::from_ne_bytes(body[at..at + 8].try_into().unwrap_or_default());
    let status = u32::from_ne_bytes(body[..4].try_into().unwrap_or_default());
    match (status, fd) {
        (OK, Some(fd)) => Ok(Received {
            fd,
            device: u32::from_ne_bytes(body[4..8].try_into().unwrap_or_default()),
            len: word(8) as usize,
            offset: word(16) as usize,
        }),
        (REFUSED, _) => Err(Error::NoPermission {
            what: "The exporting process did not add this process's pid to the whitelist (and did not disable pid validation)",
        }),
        _ => Err(unknown),
    }
}

/// Runs `call` (a system call returning -1 with `errno` on failure) again
/// while a signal interrupts it: a program's own signals (a profiler's
/// SIGPROF, a timer's SIGALRM) reach the thread that imports, and must not
/// turn a live export into "names no live export".
fn retry_interrupted(mut call: impl FnMut() -> isize) -> isize {
    loop {
        let n = call();
        if n >= 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return n;
        }
    }
}

fn receive(conn: &UnixStream) -> Option<([u8; 24], Option<OwnedFd>)> {
    let mut body = [0u8; 24];
    let mut iov = libc::iovec {
        iov_base: body.as_mut_ptr().cast(),
        iov_len: body.len(),
    };
    let mut control = [0u64; 4];
    // SAFETY: msghdr is plain data; every field used is set below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control);
    // SAFETY: `msg` points to live buffers for the call.
    let n = retry_interrupted(|| unsafe {
        libc::recvmsg(conn.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC)
    });
    if n != body.len() as isize {
        return None;
    }
    let mut fd = None;
    // SAFETY: the kernel filled `msg`'s control buffer; the macros walk it
    // within `msg_controllen`.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let raw = libc::CMSG_DATA(cmsg).cast::<RawFd>().read_unaligned();
                fd = Some(OwnedFd::from_raw_fd(raw));
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    Some((body, fd))
}

/// A new `memfd` of `len` bytes.
pub(crate) fn memfd(name: &std::ffi::CStr, len: usize) -> Result<OwnedFd> {
    let failed = Error::Failure {
        reason: "The host refused to create shared memory",
    };
    // SAFETY: a NUL-terminated name; valid flags.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(failed);
    }
    // SAFETY: a new descriptor owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let size = libc::off_t::try_from(len).map_err(|_| failed)?;
    // SAFETY: a valid memfd.
    if unsafe { libc::ftruncate(fd.as_raw_fd(), size) } != 0 {
        return Err(failed);
    }
    Ok(fd)
}

/// A key string for `handle` (CANN's keys are at most 64 characters).
pub fn key_of(handle: u64) -> String {
    format!("aclalloc-{handle:016x}")
}

/// The handle a key names (any string that is not one names nothing).
pub fn handle_of_key(key: &str) -> Option<u64> {
    let hex = key.strip_prefix("aclalloc-")?;
    (hex.len() == 16)
        .then(|| u64::from_str_radix(hex, 16).ok())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn export_import_whitelist_and_withdraw() {
        let fd = memfd(c"test", 4096).unwrap();
        let h = export(Kind::IpcMemory, 0x1000, fd, 4096, 16, 0, true).unwrap();
        assert_eq!(exporter_of(h), pid());
        assert!(
            export(
                Kind::IpcMemory,
                0x1000,
                memfd(c"t", 1).unwrap(),
                1,
                0,
                0,
                true
            )
            .is_err(),
            "one export per source"
        );
        assert!(matches!(
            import(Kind::IpcMemory, h, "key"),
            Err(Error::NoPermission { .. })
        ));
        assert!(
            import(Kind::Notify, h, "key").is_err(),
            "a key of another kind"
        );
        allow(Kind::IpcMemory, h, &[pid() as i32], "key").unwrap();
        let got = import(Kind::IpcMemory, h, "key").unwrap();
        assert_eq!((got.len, got.offset, got.device), (4096, 16, 0));
        assert_eq!(handle_of(Kind::IpcMemory, 0x1000), Some(h));
        assert_eq!(withdraw(Kind::IpcMemory, h), Some(0x1000));
        assert!(matches!(
            import(Kind::IpcMemory, h, "key"),
            Err(Error::InvalidParam { .. })
        ));
        assert!(import(Kind::IpcMemory, h ^ 1, "key").is_err(), "made up");
        assert_eq!(handle_of_key(&key_of(h)), Some(h));
        assert_eq!(handle_of_key("aclalloc-12"), None);
    }
}
