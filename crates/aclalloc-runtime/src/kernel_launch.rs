//! `aclrtLaunchKernelWithConfig` on the host runtime: the stand-in of a
//! loaded kernel ([`super::kernel_binary`]) queued on the stream with a copy
//! of its argument list ([`super::kernel_args`]), run by the stream's
//! worker once per block, each call through the guarded foreign call (a
//! C++ exception ends the process naming the kernel, as any host kernel).

use super::host::HostRuntime;
use super::kernel_args;
use super::kernel_binary::{self, StandIn};
use super::stream_worker::Task;
use crate::base::error::{Error, Result};
use crate::base::foreign_call;
use crate::base::ids::{FunctionHandle, KernelArgsHandle};
use crate::registry::StreamKey;
use std::ffi::c_void;
use std::sync::Arc;

/// One queued launch: what its task owns.
struct Launch {
    entry: StandIn,
    /// Keeps the binary mapped until the launch has run, even unloaded.
    _library: Arc<libloading::Library>,
    args: kernel_args::Snapshot,
    blocks: u32,
    device: u32,
}

unsafe extern "C" fn run_launch(_: *mut c_void, _: usize, data: *mut c_void) {
    // SAFETY: the box `launch_kernel` made for this task, taken once.
    let mut launch = unsafe { Box::from_raw(data.cast::<Launch>()) };
    let size = launch.args.size;
    let args = launch.args.words.as_mut_ptr().cast::<c_void>();
    for index in 0..launch.blocks {
        let mut block = kernel_binary::block(index, launch.blocks);
        // SAFETY: the stand-in ABI: the list and its size, and this block.
        unsafe {
            foreign_call::kernel(
                launch.entry,
                args,
                size,
                (&raw mut block).cast(),
                launch.device,
            )
        };
        if foreign_call::unwind_paused() {
            // The thread is ending (pthread_exit in the stand-in): no more blocks.
            break;
        }
    }
}

/// A launch task dropped before it ran: its box goes.
///
/// # Safety
/// `data` is the box `launch_kernel` made, not taken back by `run_launch`.
unsafe fn drop_launch(data: *mut c_void) {
    // SAFETY: the function's contract.
    drop(unsafe { Box::from_raw(data.cast::<Launch>()) });
}

impl HostRuntime {
    /// `aclrtLaunchKernelWithConfig`: queues `function` on `stream` (None:
    /// the default stream) with a copy of `args` as it is now, to run
    /// `blocks` times (block 0 to `blocks - 1`).
    pub fn launch_kernel_with_config(
        &self,
        function: FunctionHandle,
        blocks: u32,
        stream: Option<StreamKey>,
        args: KernelArgsHandle,
    ) -> Result<()> {
        if blocks == 0 {
            return Err(Error::InvalidParam {
                param: "numBlocks",
                reason: "It must be greater than 0",
            });
        }
        let f = kernel_binary::function(function)?;
        let snapshot = kernel_args::snapshot(args, function)?;
        let (_, s) = self.resolve_stream(stream)?;
        let raw = Box::into_raw(Box::new(Launch {
            entry: f.entry,
            _library: f.library,
            args: snapshot,
            blocks,
            device: s.device(),
        }));
        let queued = s.enqueue(Task::Owning {
            run: run_launch,
            size: 0,
            data: raw.cast(),
            free: drop_launch,
            kernel: true,
        });
        if queued.is_err() {
            // SAFETY: the box made above, which the task never took.
            drop(unsafe { Box::from_raw(raw) });
        }
        queued
    }
}
