//! Sleep and wake, a property of a *tagged* pool.
//!
//! Every pool's device memory passes through a `Sleeper`. Untagged, it
//! only forwards. Tagged ([`Pool::set_tag`], before the pool's first
//! segment), it takes even fixed segments through the device's virtual
//! memory (reserve, then map a page at a time), and it records every page
//! the pool maps, so [`Pool::sleep`] can give each page's physical memory
//! back while its address range stays reserved, and [`Pool::wake`] can map
//! new memory at the same addresses. This needs only CANN's virtual-memory
//! API, so it works in front of a real runtime too, where `aclrtMalloc`
//! memory cannot be given back without being freed.
//!
//! The pool's books do not change: a sleeping pool still holds its segments
//! and blocks, and every statistic (`reserved_bytes` included) reads as
//! before sleep. The device's free memory (`aclrtGetMemInfo`) shows what
//! was given back; [`Pool::sleeping_bytes`] says how much.
//!
//! The pool hands out nothing while asleep (as PyTorch's CuMemAllocator
//! users expect: an allocation fails, it does not wait). A tagged pool
//! lends no blocks to the threads' caches, so every allocation meets that
//! check. Frees, `empty_cache` and closing work while asleep: a sleeping
//! page given back drops its offloaded copy.
//!
//! [`sleep_all`] and [`wake_all`] act on every live tagged pool of the
//! process (`aclallocSleep`, `aclallocWakeUp`).

use super::device::DeviceMemory;
use super::engine::round_up;
use super::offload::HostCopy;
use super::stats::STAT_ALL;
use super::virtual_memory::VirtualMemory;
use super::Pool;
use crate::base::asleep;
use crate::base::error::{Error, Result};
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

/// The token a tagged pool's pages carry: the real one is kept here, since
/// waking maps new physical memory under the pool's unchanged page map.
const TOKEN: NonZeroUsize = NonZeroUsize::MIN;

/// A pool's device memory, able to sleep once tagged.
pub(crate) struct Sleeper {
    inner: Box<dyn DeviceMemory>,
    /// Read without the lock on every device call of an untagged pool.
    tagged: AtomicBool,
    /// Set before the pages go, cleared once every page is back.
    asleep: AtomicBool,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    tag: Option<Box<str>>,
    /// The refusal message of this tag's sleeping memory.
    message: &'static str,
    /// Fixed segments: start → reserved length.
    fixed: HashMap<usize, usize>,
    /// Every page mapped for the pool, fixed or expandable, by address.
    pages: BTreeMap<usize, Page>,
    /// Bytes of the offloaded copies held now.
    offloaded: usize,
    /// Pages given back now.
    sleeping: usize,
}

enum Page {
    Mapped(NonZeroUsize),
    /// Given back; its contents, if offloaded.
    Asleep(Option<HostCopy>),
}

/// The process's tagged pools.
static TAGGED: Mutex<Vec<Weak<Sleeper>>> = Mutex::new(Vec::new());

impl Sleeper {
    pub(crate) fn new(inner: Box<dyn DeviceMemory>) -> Self {
        Sleeper {
            inner,
            tagged: AtomicBool::new(false),
            asleep: AtomicBool::new(false),
            state: Mutex::new(State::default()),
        }
    }

    fn vm(&self) -> Option<&dyn VirtualMemory> {
        self.inner.virtual_memory()
    }

    #[inline]
    pub(crate) fn is_tagged(&self) -> bool {
        self.tagged.load(Ordering::Relaxed)
    }

    #[inline]
    pub(crate) fn is_asleep(&self) -> bool {
        self.asleep.load(Ordering::Acquire)
    }

    /// Fails while asleep: a sleeping pool hands out nothing.
    #[inline]
    pub(crate) fn check_awake(&self) -> Result<()> {
        if self.is_asleep() {
            return Err(self.asleep_error());
        }
        Ok(())
    }

    #[cold]
    fn asleep_error(&self) -> Error {
        let tag = self.state.lock().tag.clone().unwrap_or_default();
        Error::InvalidParam {
            param: "pool",
            reason: asleep::refusal(&tag),
        }
    }

    fn tag(&self) -> Option<String> {
        self.state.lock().tag.as_deref().map(str::to_owned)
    }

    /// Called by the pool once its segments are gone for good.
    pub(crate) fn closed(self: &Arc<Self>) {
        let mut st = self.state.lock();
        for (&addr, page) in &st.pages {
            if matches!(page, Page::Asleep(_)) {
                asleep::take(addr);
            }
        }
        st.pages.clear();
        st.offloaded = 0;
        st.sleeping = 0;
        self.asleep.store(false, Ordering::Release);
        self.tagged.store(false, Ordering::Relaxed);
        st.tag = None;
        drop(st);
        unregister(self);
    }

    /// Maps the page at `addr` for the pool and records it.
    fn map_tagged_page(&self, vm: &dyn VirtualMemory, st: &mut State, addr: usize) -> bool {
        match vm.map_page(addr) {
            Some(token) => {
                st.pages.insert(addr, Page::Mapped(token));
                true
            }
            None => false,
        }
    }

    /// Gives the page at `addr` back, whether mapped or asleep.
    fn drop_page(&self, vm: &dyn VirtualMemory, st: &mut State, addr: usize) {
        match st.pages.remove(&addr) {
            Some(Page::Mapped(token)) => vm.unmap_page(addr, token),
            Some(Page::Asleep(copy)) => {
                asleep::take(addr);
                st.sleeping -= 1;
                st.offloaded -= copy.map_or(0, |c| c.len());
            }
            None => {}
        }
    }

    /// Gives back the physical memory of every mapped page, copying it to
    /// host memory first with `offload`. Returns the bytes given back.
    fn sleep(&self, offload: bool) -> Result<usize> {
        let Some(vm) = self.vm() else { return Ok(0) };
        // New allocations fail from here on; queued work finishes first.
        if self.asleep.swap(true, Ordering::AcqRel) {
            return Ok(0);
        }
        vm.synchronize();
        let mut guard = self.state.lock();
        let st = &mut *guard;
        let page = vm.page_size();
        let message = st.message;
        let mut given = 0;
        for (&addr, p) in st.pages.iter_mut() {
            let Page::Mapped(token) = *p else { continue };
            let copy = if offload {
                let mut buf = HostCopy::new(page).ok_or(Error::BadAlloc {
                    what: "host memory for a sleeping pool's offloaded contents",
                })?;
                if !vm.read(addr, buf.as_mut_slice()) {
                    return Err(Error::Failure {
                        reason: "The device refused to copy a sleeping pool's memory to the host",
                    });
                }
                st.offloaded += page;
                Some(buf)
            } else {
                None
            };
            vm.unmap_page(addr, token);
            *p = Page::Asleep(copy);
            asleep::put(addr, page, message);
            st.sleeping += 1;
            given += page;
        }
        Ok(given)
    }

    /// Maps new memory under every sleeping page and restores what was
    /// offloaded. On failure the pages done stay mapped and the pool stays
    /// asleep: a later wake finishes. Returns the bytes mapped.
    fn wake(&self) -> Result<usize> {
        let Some(vm) = self.vm() else { return Ok(0) };
        if !self.is_asleep() {
            return Ok(0);
        }
        let mut guard = self.state.lock();
        let st = &mut *guard;
        let mut mapped = 0;
        for (&addr, p) in st.pages.iter_mut() {
            let Page::Asleep(copy) = p else { continue };
            let Some(token) = vm.map_page(addr) else {
                return Err(self.out_of_memory(vm.page_size()));
            };
            if let Some(data) = copy.take() {
                if !vm.write(addr, data.as_slice()) {
                    vm.unmap_page(addr, token);
                    *copy = Some(data);
                    return Err(Error::Failure {
                        reason: "The device refused to copy a waking pool's contents back",
                    });
                }
                st.offloaded -= data.len();
            }
            *p = Page::Mapped(token);
            asleep::take(addr);
            st.sleeping -= 1;
            mapped += vm.page_size();
        }
        self.asleep.store(false, Ordering::Release);
        Ok(mapped)
    }
}

impl Sleeper {
    /// A wake's failure to map `size` bytes, with the device's free memory when known.
    #[cold]
    fn out_of_memory(&self, size: usize) -> Error {
        let device = self.inner.device();
        match self.inner.free_memory() {
            Some(free) => Error::DeviceMemoryExhausted {
                device: u32::try_from(device).unwrap_or(0),
                size,
                free,
                capacity: self.inner.capacity(),
            },
            None => Error::AllocatorReturnedNull {
                allocator: "device",
                size,
                device,
            },
        }
    }
}

impl DeviceMemory for Sleeper {
    fn malloc(&self, size: usize) -> Option<NonZeroUsize> {
        if !self.is_tagged() {
            return self.inner.malloc(size);
        }
        let vm = self.vm()?;
        if self.is_asleep() {
            return None;
        }
        let page = vm.page_size();
        let len = round_up(size, page);
        let start = vm.reserve(len)?;
        let mut st = self.state.lock();
        for at in (start.get()..start.get() + len).step_by(page) {
            if !self.map_tagged_page(vm, &mut st, at) {
                for done in (start.get()..at).step_by(page) {
                    self.drop_page(vm, &mut st, done);
                }
                vm.release(start, len);
                return None;
            }
        }
        st.fixed.insert(start.get(), len);
        Some(start)
    }

    fn free(&self, addr: NonZeroUsize, size: usize) {
        if !self.is_tagged() {
            return self.inner.free(addr, size);
        }
        let Some(vm) = self.vm() else { return };
        // Nothing queued may still use it (what aclrtFree would wait for);
        // waited for with no lock held, as a stream's worker may need one.
        vm.synchronize();
        let mut st = self.state.lock();
        let Some(len) = st.fixed.remove(&addr.get()) else {
            return;
        };
        for at in (addr.get()..addr.get() + len).step_by(vm.page_size()) {
            self.drop_page(vm, &mut st, at);
        }
        vm.release(addr, len);
    }

    fn capacity(&self) -> usize {
        self.inner.capacity()
    }

    fn device(&self) -> i32 {
        self.inner.device()
    }

    fn virtual_memory(&self) -> Option<&dyn VirtualMemory> {
        self.vm().map(|_| self as &dyn VirtualMemory)
    }

    fn free_memory(&self) -> Option<usize> {
        self.inner.free_memory()
    }
}

impl VirtualMemory for Sleeper {
    fn page_size(&self) -> usize {
        self.vm().map_or(0, |vm| vm.page_size())
    }

    fn reserve(&self, size: usize) -> Option<NonZeroUsize> {
        self.vm()?.reserve(size)
    }

    fn release(&self, addr: NonZeroUsize, size: usize) {
        if let Some(vm) = self.vm() {
            vm.release(addr, size);
        }
    }

    fn map_page(&self, addr: usize) -> Option<NonZeroUsize> {
        let vm = self.vm()?;
        if !self.is_tagged() {
            return vm.map_page(addr);
        }
        if self.is_asleep() {
            return None;
        }
        self.map_tagged_page(vm, &mut self.state.lock(), addr)
            .then_some(TOKEN)
    }

    fn unmap_page(&self, addr: usize, token: NonZeroUsize) {
        let Some(vm) = self.vm() else { return };
        if !self.is_tagged() {
            return vm.unmap_page(addr, token);
        }
        self.drop_page(vm, &mut self.state.lock(), addr);
    }

    fn synchronize(&self) {
        if let Some(vm) = self.vm() {
            vm.synchronize();
        }
    }

    fn read(&self, addr: usize, out: &mut [u8]) -> bool {
        self.vm().is_some_and(|vm| vm.read(addr, out))
    }

    fn write(&self, addr: usize, data: &[u8]) -> bool {
        self.vm().is_some_and(|vm| vm.write(addr, data))
    }
}

fn unregister(sleeper: &Arc<Sleeper>) {
    let me = Arc::downgrade(sleeper);
    TAGGED
        .lock()
        .retain(|w| w.strong_count() > 0 && !w.ptr_eq(&me));
}

/// The live tagged pools' sleepers, with their tags.
fn tagged() -> Vec<(Arc<Sleeper>, String)> {
    let mut list = TAGGED.lock();
    list.retain(|w| w.strong_count() > 0);
    list.iter()
        .filter_map(Weak::upgrade)
        .filter_map(|s| s.tag().map(|t| (s, t)))
        .collect()
}

/// Puts every tagged pool of the process to sleep, and the memory of every
/// tagged region ([`crate::region`]): tags in `offload_tags` copy their
/// contents to host memory first, the others' contents are discarded.
/// Pools already asleep stay as they are. Every pool is tried, then the
/// regions; the first failure is returned. Returns the bytes given back.
pub fn sleep_all(offload_tags: &[&str]) -> Result<usize> {
    let mut given = 0;
    let mut first = None;
    for (s, tag) in tagged() {
        match s.sleep(offload_tags.contains(&tag.as_str())) {
            Ok(n) => given += n,
            Err(e) => {
                first.get_or_insert(e);
            }
        }
    }
    match crate::region::sleep_all(offload_tags) {
        Ok(n) => given += n,
        Err(e) => {
            first.get_or_insert(e);
        }
    }
    first.map_or(Ok(given), Err)
}

/// Wakes the tagged pools and the region memory ([`crate::region`]) whose
/// tag is in `tags` (`None`: every one). Pools already awake stay as they
/// are. Every pool is tried, then the regions (all or nothing); the first
/// failure is returned. Returns the bytes mapped again.
pub fn wake_all(tags: Option<&[&str]>) -> Result<usize> {
    let mut mapped = 0;
    let mut first = None;
    for (s, tag) in tagged() {
        if tags.is_some_and(|t| !t.contains(&tag.as_str())) {
            continue;
        }
        match s.wake() {
            Ok(n) => mapped += n,
            Err(e) => {
                first.get_or_insert(e);
            }
        }
    }
    match crate::region::wake_all(tags) {
        Ok(n) => mapped += n,
        Err(e) => {
            first.get_or_insert(e);
        }
    }
    first.map_or(Ok(mapped), Err)
}

impl Pool {
    /// Labels the pool (`None`: removes the label), which makes it able to
    /// sleep and joins it to [`sleep_all`]/[`wake_all`]. Refused once the
    /// pool holds a segment, and on a device without virtual memory.
    pub fn set_tag(&self, tag: Option<&str>) -> Result<()> {
        if tag.is_some_and(|t| t.is_empty()) {
            return Err(Error::InvalidParam {
                param: "tag",
                reason: "It is empty (pass NULL to remove a tag)",
            });
        }
        if self.sleeper.vm().is_none() {
            return Err(Error::NotSupported {
                what: "a tagged pool on a device without virtual memory (aclrtReserveMemAddress)",
            });
        }
        // Under every lock: no segment can appear meanwhile.
        self.exclusive(None, |ex| {
            if ex.global.closed {
                return Err(super::engine::CLOSED);
            }
            if ex
                .shards
                .iter()
                .any(|c| c.stats.segment[STAT_ALL].current > 0)
            {
                return Err(Error::InvalidParam {
                    param: "pool",
                    reason: "It already holds memory: set its tag before its first allocation",
                });
            }
            let mut st = self.sleeper.state.lock();
            st.tag = tag.map(Box::from);
            st.message = asleep::message(tag.unwrap_or_default());
            self.sleeper.tagged.store(tag.is_some(), Ordering::Relaxed);
            // With no segment nothing sleeps: a new tag starts awake.
            self.sleeper.asleep.store(false, Ordering::Release);
            Ok(())
        })?;
        unregister(&self.sleeper);
        if tag.is_some() {
            TAGGED.lock().push(Arc::downgrade(&self.sleeper));
        }
        Ok(())
    }

    /// The pool's tag, if any.
    pub fn tag(&self) -> Option<String> {
        self.sleeper.tag()
    }

    /// Gives back the physical memory of every segment of this tagged pool,
    /// after the device's queued work; with `offload`, its contents are
    /// copied to host memory first. Addresses stay reserved. A pool already
    /// asleep stays as it is (0). Returns the bytes given back.
    pub fn sleep(&self, offload: bool) -> Result<usize> {
        if !self.sleeper.is_tagged() {
            return Err(UNTAGGED);
        }
        self.sleeper.sleep(offload)
    }

    /// Maps new physical memory at the same addresses and restores the
    /// offloaded contents; discarded contents come back as fresh memory
    /// (zero on the host runtime, unspecified on a device). A pool awake
    /// stays as it is (0). Returns the bytes mapped.
    pub fn wake(&self) -> Result<usize> {
        if !self.sleeper.is_tagged() {
            return Err(UNTAGGED);
        }
        self.sleeper.wake()
    }

    /// True between [`Pool::sleep`] and the end of a successful [`Pool::wake`].
    pub fn is_asleep(&self) -> bool {
        self.sleeper.is_asleep()
    }

    /// Bytes of physical memory given back by sleep now (0 when awake).
    pub fn sleeping_bytes(&self) -> usize {
        let st = self.sleeper.state.lock();
        st.sleeping * self.sleeper.page_size()
    }

    /// Bytes of host memory holding offloaded contents now (0 when awake).
    pub fn offloaded_bytes(&self) -> usize {
        self.sleeper.state.lock().offloaded
    }
}

const UNTAGGED: Error = Error::InvalidParam {
    param: "pool",
    reason: "It has no tag: only a tagged pool sleeps (aclallocPoolSetTag)",
};
