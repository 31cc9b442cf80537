//! "Forward or implement", for every CANN runtime export: the one macro
//! that writes their bodies (`real_or_host!`) and the point where the
//! process is wired before the first of them runs ([`ensure`]).
//!
//! Each export's body is `real_or_host!(name(args) { host body })`: in front
//! of a real runtime that has `name` (`crate::interpose::next`, one lookup
//! for every name of its list), the real function; else the host body, this
//! library's implementation. Adding a CANN function is one entry in that
//! list plus its export (docs/ARCHITECTURE.md, "Adding a CANN function").

use std::sync::{Once, OnceLock};

static WIRED: Once = Once::new();
/// What wires the process (the composition root's, `crate::ffi::wiring::process`, set at load).
static WIRING: OnceLock<fn()> = OnceLock::new();

/// Sets what [`ensure`] runs once (the composition root, at load).
pub(crate) fn set_wiring(wire: fn()) {
    let _ = WIRING.set(wire);
}

/// Makes sure the process is wired (the decision taken, the device port
/// installed); returns at once after the first time.
#[inline]
pub fn ensure() {
    if !WIRED.is_completed() {
        WIRED.call_once(|| match WIRING.get() {
            Some(wire) => wire(),
            None => crate::interpose::next::resolve(),
        });
    }
}

/// The body of a CANN runtime export `$name($arg: $ty, ...)` (returning
/// `aclError`, or `-> $ret`): in front of a real runtime that has `$name`,
/// its function with the arguments unchanged, then `after_success $after`
/// once it returned `ACL_SUCCESS` (what this library's records must see);
/// else `$host`, this library's implementation (a `Result`). Both in the
/// boundary, under the export's name.
macro_rules! real_or_host {
    ($name:ident($($arg:ident: $ty:ty),* $(,)?) $(, after_success $after:block)? $host:block) => {
        $crate::ffi::wiring::dispatch::real_or_host!(
            $name($($arg: $ty),*) -> $crate::base::error::aclError $(, after_success $after)? $host
        )
    };
    ($name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty $(, after_success $after:block)? $host:block) => {{
        $crate::ffi::wiring::dispatch::ensure();
        type Real = unsafe extern "C" fn($($ty),*) -> $ret;
        // SAFETY: `Real` is the export's own signature, CANN's C type of `$name`.
        let real = unsafe {
            $crate::interpose::next::real::<Real>($crate::interpose::next::Sym::$name)
        };
        match real {
            Some(real) => $crate::ffi::boundary::passthrough(stringify!($name), || {
                // SAFETY: the arguments go unchanged to a function with the same contract.
                let rc = unsafe { real($($arg),*) };
                $(if rc == $crate::base::error::ACL_SUCCESS $after)?
                rc
            }),
            None => $crate::ffi::boundary::boundary(stringify!($name), || $host),
        }
    }};
}
pub(crate) use real_or_host;
