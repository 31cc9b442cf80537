//! Tables of live handles, one implementation for every kind.
//!
//! A handle given to C is a number, not the address of anything: the library
//! finds the object by looking the number up, so a destroyed, forged or foreign
//! pointer is refused without ever being dereferenced. Numbers are never reused
//! (a stale handle cannot alias a newer object) and carry a per-kind tag in the
//! top 16 bits, above every user-space address on 64-bit Linux, so no real
//! pointer a caller holds can be mistaken for a handle.
//!
//! Each kind has its own type ([`super::ids`]: `DescriptorHandle`,
//! `PoolHandle`, ...) implementing [`Handle`], and a table is typed by it, so
//! a pool handle cannot be looked up in the plugin table by mistake: it does
//! not compile.
//!
//! Two tables, one mechanism. Both issue ids from one counter and keep
//! handle → value in a [`Table`] (lock-free, allocation-free reads):
//! - [`HandleMap`] holds small `Copy` values inline (a few words, [`Packed`]):
//!   a lookup is one table read. Pools use it: every pool callback resolves
//!   its handle.
//! - [`HandleTable`] holds any object, in a *shell* the table owns; the
//!   handle maps to its shell, found lock-free, and the object inside is read
//!   under the shell's own reader-writer lock (no lock shared between
//!   handles). Shells are recycled for new handles, never freed while the
//!   table lives, so a reader that found a shell just before a removal still
//!   reads valid memory: it sees the shell empty or holding another handle,
//!   and gets `None`.

use super::error::{Error, Result};
use super::table::{Packed, Table, VALUE_WORDS};
use crate::base::sync::statics::AtomicUsize;
use crate::base::sync::Ordering;
use parking_lot::{Mutex, RwLock};
use std::marker::PhantomData;
use std::num::NonZeroUsize;

#[cfg(not(target_pointer_width = "64"))]
compile_error!("aclalloc supports 64-bit targets only, as CANN does");

/// The one list of handle tags, one per kind of handle handed to C: a
/// handle of one kind is never taken for another, whichever table holds it.
pub mod tags {
    /// Allocator descriptors (`aclrtAllocatorDesc`).
    pub const DESCRIPTOR: u16 = 0xACA1;
    /// Streams of the host runtime (`aclrtStream`).
    pub const STREAM: u16 = 0xACA3;
    /// Contexts of the host runtime (`aclrtContext`).
    pub const CONTEXT: u16 = 0xACA4;
    /// Caching pools (`aclallocPool`).
    pub(crate) const POOL: u16 = 0xACA5;
    /// Pluggable allocators (`aclallocPluggable`).
    pub(crate) const PLUGGABLE: u16 = 0xACA6;
    /// Physical memory of the host runtime's virtual memory
    /// (`aclrtDrvMemHandle`).
    pub(crate) const PHYSICAL: u16 = 0xACA7;
    /// Events of the host runtime (`aclrtEvent`).
    pub(crate) const EVENT: u16 = 0xACA8;
    /// Memory pools of the default allocator (`aclallocMemPool`).
    pub(crate) const MEM_POOL: u16 = 0xACB1;
    /// Notifies of the host runtime (`aclrtNotify`).
    pub const NOTIFY: u16 = 0xACB2;
    /// Kernel binaries loaded by the host runtime (`aclrtBinHandle`).
    pub(crate) const BINARY: u16 = 0xACB3;
    /// Kernel functions of a loaded binary (`aclrtFuncHandle`).
    pub(crate) const FUNCTION: u16 = 0xACB4;
    /// Kernel argument lists (`aclrtArgsHandle`).
    pub(crate) const KERNEL_ARGS: u16 = 0xACB5;
    /// Arguments of a kernel argument list (`aclrtParamHandle`).
    pub(crate) const KERNEL_PARAM: u16 = 0xACB6;
    /// Model running instances of the host runtime (`aclmdlRI`).
    pub(crate) const MODEL: u16 = 0xACB7;
    /// Updatable task groups of captured models (`aclrtTaskGrp`).
    pub(crate) const TASK_GROUP: u16 = 0xACB8;
    /// Condition handles of captured models (`aclmdlRICondHandle`).
    pub(crate) const CONDITION: u16 = 0xACB9;
    /// Data buffers (`aclDataBuffer`).
    pub(crate) const DATA_BUFFER: u16 = 0xACBA;
    /// Physical memory made inside a tagged region (`aclrtDrvMemHandle`):
    /// aclalloc's own handle, valid through sleep and wake while the
    /// runtime's physical memory behind it changes.
    pub(crate) const REGION_PHYSICAL: u16 = 0xACC0;
    /// Labels of built models (`aclrtLabel`).
    pub(crate) const LABEL: u16 = 0xACD0;
    /// Label lists (`aclrtLabelList`).
    pub(crate) const LABEL_LIST: u16 = 0xACD1;
}

/// Where the tag sits in a handle (every table).
pub const TAG_SHIFT: u32 = 48;
const ID_MASK: usize = (1 << TAG_SHIFT) - 1;

/// A kind of handle: a newtype around the handle's number, with its tag.
pub trait Handle: Copy + Eq {
    /// The tag in the top 16 bits of every handle of this kind.
    const TAG: u16;

    /// The handle with this number. Whether it is live, or even of this
    /// kind, is for a table to say.
    fn from_value(value: NonZeroUsize) -> Self;

    /// The handle's number.
    fn value(self) -> NonZeroUsize;

    /// True when `value` carries this kind's tag and a non-zero id: it could
    /// be a live handle of this kind (only a table can say whether it is).
    #[inline]
    fn could_be(value: usize) -> bool {
        value >> TAG_SHIFT == Self::TAG as usize && value & ID_MASK != 0
    }
}

/// `Box::new` that gives `None` instead of ending the process when the host
/// has no memory.
pub fn try_box<T>(value: T) -> Option<Box<T>> {
    let layout = std::alloc::Layout::new::<T>();
    if layout.size() == 0 {
        return Some(Box::new(value));
    }
    // SAFETY: the layout's size is not zero.
    let ptr = unsafe { std::alloc::alloc(layout) }.cast::<T>();
    if ptr.is_null() {
        return None;
    }
    // SAFETY: `ptr` is a fresh allocation with `T`'s layout, written before
    // the Box owns it; the Box frees it with the same layout.
    unsafe {
        ptr.write(value);
        Some(Box::from_raw(ptr))
    }
}

/// True when `bytes` of host memory can be had now. Taken and given straight
/// back, so that a create path's small allocations through the std
/// containers, which end the process when the host has no memory, find room.
pub fn host_has_room(bytes: usize) -> bool {
    let Ok(layout) = std::alloc::Layout::from_size_align(bytes.max(1), 16) else {
        return false;
    };
    // SAFETY: the layout's size is not zero.
    let ptr = unsafe { std::alloc::alloc(layout) };
    if ptr.is_null() {
        return false;
    }
    // SAFETY: allocated just above with this layout.
    unsafe { std::alloc::dealloc(ptr, layout) };
    true
}

/// Handle ids, issued once each.
struct Ids {
    next: AtomicUsize,
}

impl Ids {
    const fn new() -> Self {
        Ids {
            next: AtomicUsize::new(1),
        }
    }

    fn issue<H: Handle>(&self) -> Result<H> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        if id > ID_MASK {
            return Err(Error::Internal {
                reason: "the handle space is exhausted",
            });
        }
        let value =
            NonZeroUsize::new(((H::TAG as usize) << TAG_SHIFT) | id).ok_or(Error::Internal {
                reason: "a handle was zero",
            })?;
        Ok(H::from_value(value))
    }
}

/// Live handles of kind `H`, each naming a small `Copy` value held inline:
/// lookups read one [`Table`] entry, without a lock or an allocation.
pub struct HandleMap<H, V, const N: usize = VALUE_WORDS> {
    ids: Ids,
    live: Table<V, N>,
    _kind: PhantomData<fn() -> H>,
}

impl<H: Handle, V: Packed<N>, const N: usize> HandleMap<H, V, N> {
    /// An empty map with room for `capacity` handles before it first grows.
    pub fn with_capacity(capacity: usize) -> Self {
        HandleMap {
            ids: Ids::new(),
            live: Table::with_capacity(capacity.saturating_mul(4)),
            _kind: PhantomData,
        }
    }

    /// Stores `value` under a new handle; [`Error::BadAlloc`] when the host
    /// has no memory for the table to grow.
    pub fn insert(&self, value: V) -> Result<H> {
        let handle = self.ids.issue::<H>()?;
        self.live.try_insert(handle.value(), value)?;
        Ok(handle)
    }

    /// The value behind `handle`, or `None` when it is not live.
    #[inline]
    pub fn get(&self, handle: H) -> Option<V> {
        if !H::could_be(handle.value().get()) {
            return None;
        }
        self.live.get(handle.value())
    }

    /// Replaces the value of a live handle; `None` (and no change) when it
    /// is not live. Callers serialise their own read-modify-write.
    pub fn replace(&self, handle: H, value: V) -> Option<V> {
        if !H::could_be(handle.value().get()) {
            return None;
        }
        self.live
            .write()
            .update(handle.value(), |v| std::mem::replace(v, value))
    }

    /// Removes `handle`, returning its value.
    pub fn remove(&self, handle: H) -> Option<V> {
        if !H::could_be(handle.value().get()) {
            return None;
        }
        self.live.remove(handle.value())
    }

    /// Every live handle and its value.
    pub fn entries(&self) -> Vec<(H, V)> {
        self.live
            .entries()
            .into_iter()
            .map(|(k, v)| (H::from_value(k), v))
            .collect()
    }

    /// The number of live handles.
    pub fn len(&self) -> usize {
        self.live.len()
    }

    /// True when no handle is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Where an object lives while its handle is live: the handle that owns it
/// (shells are recycled) and the object, under a lock of its own.
struct Shell<T> {
    /// Its place in the table's list of shells.
    index: usize,
    slot: RwLock<Option<(usize, T)>>,
}

/// A shell's address, the value a [`HandleTable`] keeps per handle.
struct ShellRef<T>(*const Shell<T>);

impl<T> Clone for ShellRef<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for ShellRef<T> {}

// SAFETY: the address is only ever read back by the table that boxed the
// shell, which keeps it until the table is dropped; sending it to another
// thread hands that thread a `&Shell<T>`, sound when `T: Send + Sync`.
unsafe impl<T: Send + Sync> Send for ShellRef<T> {}

// SAFETY: `unpack` only sees words `pack` produced: word 0 is a shell
// address; every bit pattern of the words is a valid `ShellRef` anyway
// (it is a raw pointer, dereferenced only by the table that made it).
unsafe impl<T> Packed<1> for ShellRef<T> {
    fn pack(&self) -> [usize; 1] {
        [self.0 as usize]
    }
    unsafe fn unpack([shell]: [usize; 1]) -> Self {
        ShellRef(shell as *const Shell<T>)
    }
}

/// The shells a table owns.
struct Shells<T> {
    /// Every shell ever made, freed with the table. Boxed so that the
    /// addresses readers hold survive the Vec growing.
    #[allow(clippy::vec_box)]
    all: Vec<Box<Shell<T>>>,
    /// Indices into `all` of the shells no handle owns.
    free: Vec<usize>,
}

/// Live handles of kind `H`, each naming an object of type `T`: the handle
/// is found without a lock, the object read under its own lock.
pub struct HandleTable<H, T> {
    map: HandleMap<H, ShellRef<T>, 1>,
    shells: Mutex<Shells<T>>,
}

impl<H: Handle, T: Send + Sync> Default for HandleTable<H, T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<H: Handle, T: Send + Sync> HandleTable<H, T> {
    /// An empty table.
    pub fn new() -> Self {
        HandleTable {
            map: HandleMap::with_capacity(8),
            shells: Mutex::new(Shells {
                all: Vec::new(),
                free: Vec::new(),
            }),
        }
    }

    /// Stores `value` and returns its new handle.
    pub fn insert(&self, value: T) -> Result<H> {
        let mut shells = self.shells.lock();
        let index = match shells.free.pop() {
            Some(index) => index,
            None => {
                shells.all.try_reserve(1).map_err(|_| Error::BadAlloc {
                    what: "the handle table",
                })?;
                let room = shells.all.len() + 1;
                shells.free.try_reserve(room).map_err(|_| Error::BadAlloc {
                    what: "the handle table",
                })?;
                let index = shells.all.len();
                let shell = try_box(Shell {
                    index,
                    slot: RwLock::new(None),
                })
                .ok_or(Error::BadAlloc {
                    what: "the handle table",
                })?;
                shells.all.push(shell);
                index
            }
        };
        let shell: &Shell<T> = &shells.all[index];
        let handle = match self.map.insert(ShellRef(shell)) {
            Ok(handle) => handle,
            Err(e) => {
                shells.free.push(index);
                return Err(e);
            }
        };
        // Filled after the handle is published: a reader who finds the
        // handle before this sees an empty shell (`None`), which is right,
        // since `insert` has not returned the handle to anyone yet.
        *shell.slot.write() = Some((handle.value().get(), value));
        Ok(handle)
    }

    /// The shell of a live handle, found without a lock.
    #[inline]
    fn shell(&self, handle: H) -> Option<&Shell<T>> {
        let shell = self.map.get(handle)?;
        // SAFETY: the address came from `insert`, which took it from a boxed
        // shell in `self.shells.all`; shells are never freed before the
        // table is dropped, and `&self` keeps the table alive.
        Some(unsafe { &*shell.0 })
    }

    /// Runs `f` on the object behind `handle`, or returns `None` when the
    /// handle is not live.
    #[inline]
    pub fn with<R>(&self, handle: H, f: impl FnOnce(&T) -> R) -> Option<R> {
        let shell = self.shell(handle)?;
        let slot = shell.slot.read();
        match &*slot {
            // A recycled shell may hold another handle's object by now.
            Some((owner, value)) if *owner == handle.value().get() => Some(f(value)),
            _ => None,
        }
    }

    /// Runs `f` on the object behind `handle` with the right to change it,
    /// or returns `None` when the handle is not live.
    pub fn with_mut<R>(&self, handle: H, f: impl FnOnce(&mut T) -> R) -> Option<R> {
        let shell = self.shell(handle)?;
        let mut slot = shell.slot.write();
        match &mut *slot {
            Some((owner, value)) if *owner == handle.value().get() => Some(f(value)),
            _ => None,
        }
    }

    /// Removes and returns the object behind `handle`.
    pub fn remove(&self, handle: H) -> Option<T> {
        let mut shells = self.shells.lock();
        let shell = self.map.remove(handle)?;
        // SAFETY: as in `shell`: a boxed shell of this table.
        let shell = unsafe { &*shell.0 };
        let taken = shell.slot.write().take();
        // Room was reserved when the shell was made.
        shells.free.push(shell.index);
        taken.map(|(_, value)| value)
    }

    /// `f` applied to every live handle and its object, keeping the `Some`s.
    pub fn collect<R>(&self, mut f: impl FnMut(H, &T) -> Option<R>) -> Vec<R> {
        self.map
            .entries()
            .into_iter()
            .filter_map(|(handle, _)| self.with(handle, |value| f(handle, value)).flatten())
            .collect()
    }

    /// The number of live handles.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True when no handle is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Defines a handle kind: a newtype around the handle's number that
/// implements [`Handle`] with `$tag`.
macro_rules! handle_kind {
    ($(#[$doc:meta])* $name:ident, $tag:expr) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub struct $name(std::num::NonZeroUsize);

        impl $name {
            /// The handle C passed; whether it is live (and of this kind) is
            /// checked by the table on use.
            pub fn from_ptr(ptr: *mut std::ffi::c_void) -> Option<Self> {
                std::num::NonZeroUsize::new(ptr as usize).map($name)
            }

            /// The handle with number `value`, if it is not zero; whether it
            /// is live is checked by the table on use.
            pub fn from_raw(value: usize) -> Option<Self> {
                std::num::NonZeroUsize::new(value).map($name)
            }

            /// The handle as C sees it.
            pub fn as_ptr(self) -> *mut std::ffi::c_void {
                self.0.get() as *mut std::ffi::c_void
            }

            /// The handle as a number.
            pub fn get(self) -> usize {
                self.0.get()
            }
        }

        impl $crate::base::handles::Handle for $name {
            const TAG: u16 = $tag;
            #[inline]
            fn from_value(value: std::num::NonZeroUsize) -> Self {
                $name(value)
            }
            #[inline]
            fn value(self) -> std::num::NonZeroUsize {
                self.0
            }
        }
    };
}
pub(crate) use handle_kind;

#[cfg(test)]
mod tests {
    // The test kinds do not use every conversion the macro defines.
    #![allow(dead_code)]
    use super::*;

    handle_kind!(
        /// A kind for the tests.
        Apple,
        0xACA1
    );
    handle_kind!(
        /// Another kind for the tests.
        Pear,
        0xACA2
    );

    #[test]
    fn handles_are_unique_tagged_and_dead_after_removal() {
        let table = HandleTable::<Apple, &str>::new();
        let a = table.insert("a").unwrap();
        let b = table.insert("b").unwrap();
        assert_ne!(a, b);
        assert_eq!(a.get() >> 48, 0xACA1);
        assert_eq!(table.with(a, |v| *v), Some("a"));
        assert_eq!(table.remove(a), Some("a"));
        assert_eq!(table.with(a, |v| *v), None);
        assert_eq!(table.with_mut(a, |v| *v), None);
        assert_eq!(table.remove(a), None);
        // `c` reuses `a`'s shell, never its number.
        let c = table.insert("c").unwrap();
        assert!(c != a && c != b, "ids are never reused");
        assert_eq!(
            table.with(a, |v| *v),
            None,
            "a stale handle on a recycled shell"
        );
        assert_eq!(table.with(c, |v| *v), Some("c"));
        assert_eq!(table.with_mut(c, |v| std::mem::replace(v, "C")), Some("c"));
        assert_eq!(table.with(c, |v| *v), Some("C"));
        assert_eq!(table.len(), 2);
        let mut live = table.collect(|h, v| (*v != "b").then_some((h.get(), *v)));
        live.sort();
        assert_eq!(live, vec![(c.get(), "C")]);
    }

    #[test]
    fn foreign_pointers_and_other_kinds_are_refused() {
        let apples = HandleTable::<Apple, i32>::new();
        let pears = HandleMap::<Pear, [usize; VALUE_WORDS]>::with_capacity(4);
        let a = apples.insert(1).unwrap();
        let p = pears.insert([2; VALUE_WORDS]).unwrap();
        // Kinds are types; a number of another kind, forced through the
        // type, is still refused by its tag.
        assert_eq!(pears.get(Pear::from_value(a.value())), None);
        assert_eq!(apples.with(Apple::from_value(p.value()), |v| *v), None);
        let on_stack = 42u32;
        let forged = Apple::from_ptr(&on_stack as *const u32 as *mut _).unwrap();
        assert_eq!(apples.with(forged, |v| *v), None);
        assert_eq!(apples.remove(forged), None);
        assert_eq!(Apple::from_ptr(std::ptr::null_mut()), None);
        assert_eq!(pears.get(p), Some([2; VALUE_WORDS]));
        assert_eq!(pears.replace(p, [3; VALUE_WORDS]), Some([2; VALUE_WORDS]));
        assert_eq!(pears.remove(p), Some([3; VALUE_WORDS]));
        assert_eq!(pears.replace(p, [4; VALUE_WORDS]), None, "not revived");
        assert!(pears.is_empty());
    }

    #[test]
    fn readers_on_other_threads_see_whole_objects_or_nothing() {
        let table = HandleTable::<Apple, (usize, usize)>::new();
        let keep = table.insert((7, 7)).unwrap();
        std::thread::scope(|s| {
            s.spawn(|| {
                for i in 0..2000 {
                    let h = table.insert((i, i)).unwrap();
                    assert_eq!(table.remove(h), Some((i, i)));
                }
            });
            for _ in 0..2000 {
                assert_eq!(table.with(keep, |v| *v), Some((7, 7)));
            }
        });
        assert_eq!(table.len(), 1);
    }
}
