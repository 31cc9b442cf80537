//! The default allocator: what serves memory when nothing was registered.
//!
//! It serves workspaces of launches on streams that have no registration,
//! and the raw functions `aclallocDefaultMalloc`/`aclallocDefaultFree`, the
//! equivalents of PyTorch's `caching_allocator_alloc`/`caching_allocator_delete`.
//!
//! It is chosen at start-up by `ACLALLOC_DEFAULT_ALLOCATOR` (see
//! [`choice`]) and may be swapped from C with a descriptor, as PyTorch's
//! `change_current_allocator`, until it serves its first allocation; after
//! that a swap fails with "can't swap an already initialized allocator"
//! (memory already handed out must go back to the allocator it came from).
//!
//! The environment is read, and the chosen allocator built, only when the
//! default allocator is first needed, so a swap before any use never loads
//! what the environment names. Once in use the choice is frozen and read
//! without a lock.

mod backends;
pub use backends::{install_pool_callbacks, PoolCallbacks};
pub mod choice;
pub mod mem_pool;
pub mod per_device;
pub mod workspace;

use crate::base::descriptor::{AllocatorObj, Callbacks};
use crate::base::error::{Error, Result};
use crate::base::foreign_call::{self, Callback, Function};
use crate::base::serving;
use crate::base::sync::{AtomicU64, Ordering};
use crate::plugin::context;
use crate::plugin::live::{self, Books, LiveBlock, Stats};
use crate::pool::Pool;
use crate::registry::api::global as api;
use crate::registry::{DescriptorHandle, StreamKey};
use choice::Choice;
use parking_lot::Mutex;
use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::OnceLock;

/// What kind of allocator the default one is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The caching pool.
    Pool,
    /// Direct device memory.
    Device,
    /// A pluggable allocator from a shared object.
    Plugin,
    /// An allocator the user swapped in with a descriptor.
    Descriptor,
}

impl Kind {
    /// Its name, as `aclallocGetDefaultAllocatorName` reports it.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Pool => "pool",
            Kind::Device => "device",
            Kind::Plugin => "plugin",
            Kind::Descriptor => "descriptor",
        }
    }
}

/// An allocator in the form every consumer calls: a descriptor's callbacks.
#[derive(Clone, Copy, Debug)]
pub struct Source {
    /// What it is.
    pub kind: Kind,
    /// How to call it.
    pub callbacks: Callbacks,
}

impl Source {
    /// The allocator a live descriptor holds now (a copy, as registration takes).
    pub fn from_descriptor(desc: DescriptorHandle) -> Result<Source> {
        let callbacks = api().descriptor(desc)?.callbacks()?;
        let kind = if crate::plugin::published::is_pluggable(callbacks.obj) {
            Kind::Plugin
        } else if crate::pool::handles::with(callbacks.obj.as_ptr(), |_| ()).is_ok() {
            Kind::Pool
        } else {
            Kind::Descriptor
        };
        Ok(Source { kind, callbacks })
    }
}

/// The allocator in use, frozen at the first allocation.
#[derive(Clone, Copy)]
pub struct InUse {
    /// How consumers call it.
    pub source: Source,
    /// The caching pool itself when the allocator is a pool the library's
    /// own callbacks serve (built from the environment, or swapped in with
    /// the descriptor of a pool, not of a stream view): its fast path.
    /// Workspaces and raw blocks then go to the pool's Rust API directly,
    /// without the C callbacks, the published stream, or the table of raw
    /// blocks: the pool keeps its own live blocks and refuses anything else,
    /// and its statistics are the default allocator's.
    pub pool: Option<&'static Pool>,
    /// The default caching pool is one pool per device: the fast path
    /// takes the calling thread's device's pool.
    pub per_device: bool,
}

impl InUse {
    /// The pool the fast path serves the calling thread from, if any.
    #[inline]
    pub fn fast_pool(&self) -> Option<&'static Pool> {
        if self.per_device {
            return per_device::current_pool().ok();
        }
        self.pool
    }

    /// The pool the fast path frees `addr` to, if any.
    #[inline]
    pub fn fast_pool_of(&self, addr: usize) -> Option<&'static Pool> {
        if self.per_device {
            // Held by no pool: the current device's refuses it (and counts it).
            return per_device::holding(addr).or_else(|| per_device::current_pool().ok());
        }
        self.pool
    }
}

impl InUse {
    fn new(source: Source) -> InUse {
        InUse {
            source,
            pool: fast_pool(&source),
            per_device: source.kind == Kind::Pool && per_device::are_ours(&source.callbacks),
        }
    }
}

/// The pool behind `source` if calling its Rust API is the same as calling
/// `source`'s callbacks: the library's pool callbacks on a pool handle.
fn fast_pool(source: &Source) -> Option<&'static Pool> {
    if source.kind != Kind::Pool {
        return None;
    }
    let obj = source.callbacks.obj.as_ptr();
    let bound = crate::pool::handles::with_stream(obj, |_, bound| bound).ok()?;
    let ours = backends::pool_callbacks(source.callbacks.obj)?;
    let c = &source.callbacks;
    // Compared as addresses: the same functions, or a user's wrappers.
    let same = c.alloc as usize == ours.alloc as usize
        && c.free as usize == ours.free as usize
        && c.get_addr_from_block as usize == ours.get_addr_from_block as usize;
    // In use for the rest of the process (the allocator in use is frozen).
    (same && bound == 0)
        .then(|| crate::pool::handles::pin(obj).ok())
        .flatten()
}

/// The default allocator. The C functions use [`global`]; tests may make
/// their own.
pub struct DefaultAllocator {
    choose: fn() -> Result<Choice>,
    /// A swapped-in allocator not yet in use.
    pending: Mutex<Option<Source>>,
    /// The allocator in use; set once, at the first allocation.
    in_use: OnceLock<InUse>,
    /// The device current on the thread that built it (the pool's device).
    built_on: OnceLock<i32>,
    /// Pointers handed out by the raw functions (not on the pool's fast
    /// path): the books take concurrent callers themselves.
    raw: Books,
    /// Frees the pool's fast path refused.
    pool_refused_frees: AtomicU64,
}

impl DefaultAllocator {
    /// A default allocator that, unless swapped, becomes what `choose` says
    /// at its first use.
    pub fn new(choose: fn() -> Result<Choice>) -> Self {
        DefaultAllocator {
            choose,
            pending: Mutex::new(None),
            in_use: OnceLock::new(),
            built_on: OnceLock::new(),
            raw: live::books(),
            pool_refused_frees: AtomicU64::new(0),
        }
    }

    /// Makes `source` the default allocator; fails once the default
    /// allocator has served memory.
    pub fn swap(&self, source: Source) -> Result<()> {
        let mut pending = self.pending.lock();
        if self.in_use.get().is_some() {
            return Err(Error::AlreadyInitialized);
        }
        *pending = Some(source);
        Ok(())
    }

    /// True once the default allocator has served (or is about to serve)
    /// memory, so that it can no longer be swapped.
    pub fn is_initialized(&self) -> bool {
        self.in_use.get().is_some()
    }

    /// The allocator that serves memory, frozen from now on. This is what a
    /// launch on a stream without registration calls.
    #[inline]
    pub fn serving(&self) -> Result<Source> {
        self.frozen().map(|in_use| in_use.source)
    }

    /// The allocator in use with its fast path, frozen from now on: after
    /// the first call, one atomic load.
    #[inline]
    pub fn frozen(&self) -> Result<&InUse> {
        match self.in_use.get() {
            Some(in_use) => Ok(in_use),
            None => self.freeze(),
        }
    }

    #[cold]
    #[inline(never)]
    fn freeze(&self) -> Result<&InUse> {
        let mut pending = self.pending.lock();
        if let Some(in_use) = self.in_use.get() {
            return Ok(in_use);
        }
        let source = match *pending {
            Some(source) => source,
            None => backends::build(&(self.choose)()?)?,
        };
        *pending = None;
        // Before `in_use`: whoever sees the allocator in use sees its device.
        let _ = self.built_on.set(context::current_device());
        Ok(self.in_use.get_or_init(|| InUse::new(source)))
    }

    /// The device that was current on the thread that built the allocator in
    /// use (for the pool: the device whose memory it takes); `None` before
    /// the first use.
    pub fn built_on(&self) -> Option<i32> {
        self.in_use.get()?;
        self.built_on.get().copied()
    }

    /// The allocator in use, if the default allocator has served memory.
    pub fn in_use(&self) -> Option<Source> {
        self.in_use.get().map(|u| u.source)
    }

    /// What the default allocator is or, before its first use, will be.
    pub fn kind(&self) -> Result<Kind> {
        let pending = self.pending.lock();
        if let Some(source) = self.in_use().or(*pending) {
            return Ok(source.kind);
        }
        Ok(match (self.choose)()? {
            Choice::Pool => Kind::Pool,
            Choice::Device => Kind::Device,
            Choice::Plugin { .. } => Kind::Plugin,
        })
    }

    /// True when the allocator object `obj` is, or is about to become, the
    /// default allocator (so it must not be destroyed).
    pub fn uses(&self, obj: AllocatorObj) -> bool {
        let pending = self.pending.lock();
        self.in_use().or(*pending).is_some_and(|s| {
            s.callbacks.obj == obj
                || (s.kind == Kind::Pool
                    && per_device::pools()
                        .iter()
                        .any(|&(_, pool)| pool == obj.as_ptr() as usize))
        })
    }

    /// `caching_allocator_alloc`: `size` bytes from the default allocator for
    /// `stream` (passed on to it where it can take a stream).
    pub fn alloc(&self, size: usize, stream: Option<StreamKey>) -> Result<NonNull<c_void>> {
        let in_use = self.frozen()?;
        let stream_word = stream.map_or(0, |s| s.get().get());
        if let Some(routed) = mem_pool::route_alloc(size, stream_word) {
            return routed.map(|addr| NonNull::new(addr.get() as *mut c_void).expect("non-zero"));
        }
        if let Some(pool) = in_use.fast_pool() {
            let addr = match pool.malloc_on(stream_word, size) {
                Ok(addr) => addr,
                Err(e @ Error::PoolOutOfMemory { .. }) => {
                    mem_pool::on_oom(size, stream_word).ok_or(e)?
                }
                Err(e) => return Err(e),
            };
            return Ok(NonNull::new(addr.get() as *mut c_void).expect("non-zero"));
        }
        let c = in_use.source.callbacks;
        let device = context::current_device();
        // SAFETY: the callbacks of a complete descriptor, called as CANN's
        // executor calls them.
        // A callback that throws ends the process with its name
        // (`foreign_call`).
        let on = stream.map_or(0, |s| s.get().get());
        let site = |function| {
            move || Callback::Default {
                function,
                stream: on,
            }
        };
        // SAFETY: `c` is the complete descriptor's callbacks and object,
        // called as CANN's executor calls `alloc`.
        let block = serving::serving(stream, || unsafe {
            foreign_call::alloc(c.alloc, c.obj.as_ptr(), size, site(Function::Alloc))
        });
        let Some(block) = NonNull::new(block) else {
            let _ = live::with(&self.raw, |g| g.count_failure());
            return Err(Error::AllocatorReturnedNull {
                allocator: "default",
                size,
                device,
            });
        };
        // SAFETY: as above; `block` came from this allocator.
        let addr = unsafe {
            foreign_call::get_addr_from_block(
                c.get_addr_from_block,
                block.as_ptr(),
                site(Function::GetAddrFromBlock),
            )
        };
        let recorded = match NonNull::new(addr) {
            None => Err(Error::Internal {
                reason: "the default allocator's getAddrFromBlock returned NULL",
            }),
            Some(addr) => live::insert(
                &self.raw,
                addr.as_ptr() as usize,
                LiveBlock {
                    block: block.as_ptr() as usize,
                    size,
                    device,
                    stream: stream.map_or(0, |s| s.get().get()),
                },
            )
            .map(|()| addr),
        };
        if recorded.is_err() {
            // SAFETY: as above; handing the block back is all that is left.
            serving::serving(stream, || unsafe {
                foreign_call::free(c.free, c.obj.as_ptr(), block.as_ptr(), site(Function::Free))
            });
        }
        recorded
    }

    /// `caching_allocator_delete`: returns memory from [`DefaultAllocator::alloc`].
    /// Anything else, or a second free, is refused without reaching the allocator.
    pub fn free(&self, ptr: NonNull<c_void>) -> Result<()> {
        if let Some(freed) = mem_pool::route_free(ptr.as_ptr() as usize) {
            return freed;
        }
        if let Some(pool) = self
            .in_use
            .get()
            .and_then(|u| u.fast_pool_of(ptr.as_ptr() as usize))
        {
            return self.free_to_pool(pool, ptr);
        }
        let block = live::remove(&self.raw, ptr.as_ptr() as usize)?;
        // Memory was handed out, so the allocator is frozen: it is the one
        // that served this pointer.
        let c = self.serving()?.callbacks;
        let stream = StreamKey::from_ptr(block.stream_ptr());
        let site = || Callback::Default {
            function: Function::Free,
            stream: block.stream,
        };
        // SAFETY: as in `alloc`; the block is live and goes back once.
        serving::serving(stream, || unsafe {
            foreign_call::free(c.free, c.obj.as_ptr(), block.block as *mut c_void, site)
        });
        Ok(())
    }

    /// The pool's fast path of [`DefaultAllocator::free`]: the pool refuses
    /// what is not one of its live blocks, and tells a second free of one of
    /// its blocks from a foreign pointer.
    #[inline]
    fn free_to_pool(&self, pool: &Pool, ptr: NonNull<c_void>) -> Result<()> {
        match pool.free(ptr.as_ptr() as usize) {
            Ok(()) => Ok(()),
            Err(e) => Err(self.refused(e)),
        }
    }

    #[cold]
    fn refused(&self, e: Error) -> Error {
        self.pool_refused_frees.fetch_add(1, Ordering::Relaxed);
        pool_refusal(Some(e))
    }

    /// Statistics of the blocks it handed out (the raw functions' and, when
    /// workspaces come from it, the workspaces'). For the pool's fast path:
    /// the pool's own exact counts of blocks and requested bytes (so they
    /// also count blocks taken from the pool's handle directly, and reset
    /// with its `reset_*` calls), its out-of-memory count as failures, and
    /// the frees refused here.
    pub fn stats(&self) -> Stats {
        match self.in_use.get().and_then(InUse::fast_pool) {
            Some(pool) => {
                let p = pool.stats();
                let blocks = p.allocation[crate::pool::stats::STAT_ALL];
                let bytes = p.requested_bytes[crate::pool::stats::STAT_ALL];
                let n = |v: i64| u64::try_from(v).unwrap_or(0);
                Stats {
                    allocated_bytes_current: n(bytes.current),
                    allocated_bytes_peak: n(bytes.peak),
                    allocated_bytes_total: n(bytes.allocated),
                    freed_bytes_total: n(bytes.freed),
                    alloc_count: n(blocks.allocated),
                    free_count: n(blocks.freed),
                    active_count: n(blocks.current),
                    active_peak: n(blocks.peak),
                    failed_alloc_count: n(p.num_ooms),
                    refused_free_count: self.pool_refused_frees.load(Ordering::Relaxed),
                }
            }
            None => live::with(&self.raw, |g| g.counters())
                .map_or_else(|_| Stats::default(), Stats::from),
        }
    }
}

/// The process-wide default allocator, chosen by `ACLALLOC_DEFAULT_ALLOCATOR`.
pub fn global() -> &'static DefaultAllocator {
    static GLOBAL: OnceLock<DefaultAllocator> = OnceLock::new();
    GLOBAL.get_or_init(|| DefaultAllocator::new(Choice::from_env))
}

/// The default allocator's error for a free of `ptr` that its pool refused
/// (`None`: no pool of the default allocator holds the pointer at all): a
/// double free or a foreign pointer in the allocators' terms; anything else
/// (a closed pool) as the pool said.
pub(crate) fn pool_refusal(pool_error: Option<Error>) -> Error {
    match pool_error {
        Some(Error::PoolDoubleFree) => Error::DoubleFree,
        Some(Error::PoolForeignBlock) | None => Error::ForeignPointer,
        Some(other) => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::sync::{AtomicUsize, Ordering};

    static ALLOCS: AtomicUsize = AtomicUsize::new(0);
    static FREES: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        // Per thread: the tests run in parallel and each checks the stream
        // its own allocation saw (a shared static made this test flaky).
        static LAST_STREAM: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    extern "C" {
        fn malloc(size: usize) -> *mut c_void;
        #[link_name = "free"]
        fn c_free(ptr: *mut c_void);
    }
    unsafe extern "C" fn alloc(_: *mut c_void, size: usize) -> *mut c_void {
        if size > 1 << 30 {
            return std::ptr::null_mut();
        }
        ALLOCS.fetch_add(1, Ordering::SeqCst);
        LAST_STREAM.set(serving::current().map_or(0, |s| s.get().get()));
        // SAFETY: test allocator: `malloc` with a non-zero size; NULL is a valid answer.
        unsafe { malloc(size.max(1)) }
    }
    unsafe extern "C" fn free(_: *mut c_void, block: *mut c_void) {
        FREES.fetch_add(1, Ordering::SeqCst);
        // SAFETY: test allocator: `block` came from this allocator's `malloc` and is freed
        // once.
        unsafe { c_free(block) }
    }
    unsafe extern "C" fn addr(block: *mut c_void) -> *mut c_void {
        block
    }

    fn source(kind: Kind) -> Source {
        let mut obj = 0u8;
        Source {
            kind,
            callbacks: Callbacks {
                // Never dereferenced: the callbacks ignore it.
                obj: AllocatorObj::new(&mut obj as *mut u8 as *mut c_void).unwrap(),
                alloc,
                free,
                alloc_advise: None,
                get_addr_from_block: addr,
            },
        }
    }

    fn choose_bad() -> Result<Choice> {
        Choice::parse(Some("bogus"))
    }

    #[test]
    fn swapping_works_until_the_first_allocation_and_then_fails() {
        let d = DefaultAllocator::new(choose_bad);
        assert!(!d.is_initialized());
        d.swap(source(Kind::Descriptor)).unwrap();
        d.swap(source(Kind::Descriptor)).unwrap();
        assert_eq!(d.kind(), Ok(Kind::Descriptor));
        let stream = StreamKey::from_ptr(0x7700 as *mut c_void);
        let p = d.alloc(100, stream).unwrap();
        assert_eq!(LAST_STREAM.get(), 0x7700, "the stream reached it");
        assert!(d.is_initialized());
        assert_eq!(
            d.swap(source(Kind::Descriptor)),
            Err(Error::AlreadyInitialized)
        );
        assert_eq!(
            crate::base::errlog::message("aclallocSetDefaultAllocator", Error::AlreadyInitialized),
            "aclallocSetDefaultAllocator failed. can't swap an already initialized allocator."
        );
        let s = d.stats();
        assert_eq!((s.alloc_count, s.allocated_bytes_current), (1, 100));
        d.free(p).unwrap();
        assert_eq!(d.free(p), Err(Error::DoubleFree));
        let mut local = 0u8;
        assert_eq!(
            d.free(NonNull::from(&mut local).cast()),
            Err(Error::ForeignPointer)
        );
        assert_eq!(d.stats().allocated_bytes_current, 0);
        assert!(matches!(
            d.alloc(2 << 30, None),
            Err(Error::AllocatorReturnedNull {
                allocator: "default",
                ..
            })
        ));
        assert_eq!(d.stats().failed_alloc_count, 1);
    }

    #[test]
    fn an_invalid_environment_fails_allocations_but_leaves_the_choice_open() {
        let d = DefaultAllocator::new(choose_bad);
        assert!(matches!(
            d.alloc(8, None),
            Err(Error::Config(crate::base::env::ConfigError {
                variable: "ACLALLOC_DEFAULT_ALLOCATOR",
                ..
            }))
        ));
        assert!(d.kind().is_err());
        assert!(!d.is_initialized());
        d.swap(source(Kind::Descriptor)).unwrap();
        let p = d.alloc(8, None).unwrap();
        d.free(p).unwrap();
    }

    #[test]
    fn uses_tells_whether_an_object_is_or_will_be_the_default() {
        let d = DefaultAllocator::new(choose_bad);
        let s = source(Kind::Descriptor);
        assert!(!d.uses(s.callbacks.obj));
        d.swap(s).unwrap();
        assert!(d.uses(s.callbacks.obj));
        d.serving().unwrap();
        assert!(d.uses(s.callbacks.obj));
    }

    #[test]
    fn concurrent_first_uses_freeze_one_choice() {
        let d = DefaultAllocator::new(choose_bad);
        d.swap(source(Kind::Descriptor)).unwrap();
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    for _ in 0..500 {
                        let p = d.alloc(64, None).unwrap();
                        d.free(p).unwrap();
                    }
                });
            }
        });
        let s = d.stats();
        assert_eq!((s.alloc_count, s.free_count), (2000, 2000));
    }
}
