//! Readers look streams up while writers re-register and unregister them; every
//! registration a reader sees must be whole: its object and all its callbacks
//! from one registration, never a mix of two.

use aclalloc::ffi::cann::allocator::*;
use aclalloc::ffi::cann::types::*;
use std::ffi::c_void;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

macro_rules! callbacks {
    ($alloc:ident, $free:ident, $get:ident) => {
        #[inline(never)]
        unsafe extern "C" fn $alloc(_: *mut c_void, _: usize) -> *mut c_void {
            null_mut()
        }
        #[inline(never)]
        unsafe extern "C" fn $free(_: *mut c_void, _: *mut c_void) {}
        #[inline(never)]
        unsafe extern "C" fn $get(b: *mut c_void) -> *mut c_void {
            b
        }
    };
}
callbacks!(alloc_a, free_a, get_a);
callbacks!(alloc_b, free_b, get_b);

const OBJ_A: usize = 0xA000;
const OBJ_B: usize = 0xB000;

fn desc(obj: usize, which_a: bool) -> usize {
    let d = aclrtAllocatorCreateDesc();
    aclrtAllocatorSetObjToDesc(d, obj as *mut c_void);
    if which_a {
        aclrtAllocatorSetAllocFuncToDesc(d, Some(alloc_a));
        aclrtAllocatorSetFreeFuncToDesc(d, Some(free_a));
        aclrtAllocatorSetGetAddrFromBlockFuncToDesc(d, Some(get_a));
    } else {
        aclrtAllocatorSetAllocFuncToDesc(d, Some(alloc_b));
        aclrtAllocatorSetFreeFuncToDesc(d, Some(free_b));
        aclrtAllocatorSetGetAddrFromBlockFuncToDesc(d, Some(get_b));
        aclrtAllocatorSetAllocAdviseFuncToDesc(d, None); // refused: stays unset
    }
    d as usize
}

#[test]
fn readers_never_see_a_torn_registration_while_writers_re_register() {
    const STREAMS: usize = 256;
    const WRITER_ROUNDS: usize = 200;
    let da = desc(OBJ_A, true);
    let db = desc(OBJ_B, false);
    let stream = |i: usize| (0x7000_0000 + i * 64) as aclrtStream;
    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(AtomicUsize::new(0));

    let readers: Vec<_> = (0..3)
        .map(|r| {
            let (stop, seen) = (stop.clone(), seen.clone());
            std::thread::spawn(move || {
                let mut i = r;
                let mut torn = 0;
                while !stop.load(Ordering::Relaxed) {
                    i = (i + 7) % STREAMS;
                    let (mut d, mut o) = (null_mut(), null_mut());
                    let (mut a, mut f, mut g) = (None, None, None);
                    let rc = unsafe {
                        aclrtAllocatorGetByStream(
                            stream(i),
                            &mut d,
                            &mut o,
                            &mut a,
                            &mut f,
                            null_mut(),
                            &mut g,
                        )
                    };
                    if rc != 0 {
                        continue; // unregistered at this moment
                    }
                    seen.fetch_add(1, Ordering::Relaxed);
                    let a = a.map(|f| f as usize);
                    let f = f.map(|f| f as usize);
                    let g = g.map(|f| f as usize);
                    let whole_a = d as usize == da
                        && o as usize == OBJ_A
                        && a == Some(alloc_a as *const () as usize)
                        && f == Some(free_a as *const () as usize)
                        && g == Some(get_a as *const () as usize);
                    let whole_b = d as usize == db
                        && o as usize == OBJ_B
                        && a == Some(alloc_b as *const () as usize)
                        && f == Some(free_b as *const () as usize)
                        && g == Some(get_b as *const () as usize);
                    if !(whole_a || whole_b) {
                        torn += 1;
                    }
                }
                torn
            })
        })
        .collect();

    // On a loaded machine the readers can get no CPU at all while a fixed
    // number of rounds runs (seen: ~2 ms of writing with every reader off-CPU),
    // so writing goes on, boundedly, until they have looked.
    let started = std::time::Instant::now();
    let mut round = 0;
    while round < WRITER_ROUNDS
        || (seen.load(Ordering::Relaxed) == 0
            && started.elapsed() < std::time::Duration::from_secs(10))
    {
        let d = if round % 2 == 0 { da } else { db };
        for i in 0..STREAMS {
            assert_eq!(
                aclrtAllocatorRegister(stream(i), d as aclrtAllocatorDesc),
                0
            );
        }
        if round % 10 == 9 {
            // Unregistering moves entries inside the table (backward shift).
            for i in (0..STREAMS).step_by(3) {
                assert_eq!(aclrtAllocatorUnregister(stream(i)), 0);
            }
        }
        round += 1;
    }
    stop.store(true, Ordering::Relaxed);
    let torn: usize = readers.into_iter().map(|r| r.join().unwrap()).sum();
    assert_eq!(torn, 0, "readers saw torn registrations");
    assert!(
        seen.load(Ordering::Relaxed) > 0,
        "readers saw registrations"
    );
    for i in 0..STREAMS {
        aclrtAllocatorUnregister(stream(i));
    }
    aclrtAllocatorDestroyDesc(da as aclrtAllocatorDesc);
    aclrtAllocatorDestroyDesc(db as aclrtAllocatorDesc);
}
