//! Sleep and wake of region memory, by tag.
//!
//! Sleep waits for the device's queued work, then for every mapped backing:
//! copies it to host memory (offloaded tags), unmaps it and frees its
//! physical memory; the address stays reserved and is refused by copies,
//! sets and launches with a message naming the tag. Physical memory the
//! program made in a region but has not mapped keeps its memory: there is
//! no address to restore it at.
//!
//! Wake also waits for queued work first, then is all or nothing: each
//! sleeping backing gets new physical memory,
//! mapped at its address, and its contents back; if the device runs out
//! (or refuses a copy) partway, every backing this wake already woke is
//! unmapped and freed again, keeping its offloaded copy, and the error is
//! returned with everything asleep as before.

use super::books::{books, none_live, MappedBooks, Memory};
use super::port::RegionPort;
use crate::base::asleep;
use crate::base::error::{Error, Result};
use crate::offload::HostCopy;
use std::sync::Arc;

/// Puts the memory of every region tag to sleep, offloading the tags in
/// `offload_tags`. Returns the bytes given back; on a failure the backings
/// not yet done stay awake and the first error is returned.
pub fn sleep_all(port: &dyn RegionPort, offload_tags: &[&str]) -> Result<usize> {
    if none_live() {
        return Ok(0);
    }
    // Queued work finishes before its memory goes; waited for with no
    // lock held (a stream's work may call into the runtime).
    port.synchronize()?;
    let mut books = books();
    let tags: Vec<Arc<str>> = books.backings.values().map(|b| b.tag.clone()).collect();
    books.asleep_tags.extend(tags);
    let mut given = 0;
    let mut first = None;
    for b in books.backings.values_mut() {
        let (Memory::Awake(handle), Some(m)) = (&b.memory, b.mapping) else {
            continue;
        };
        let offload = offload_tags.contains(&&*b.tag);
        let result = (|| {
            let copy = match offload {
                true => {
                    let mut copy = HostCopy::new(m.size).ok_or(Error::BadAlloc {
                        what: "host memory for a sleeping region's offloaded contents",
                    })?;
                    port.read(m.va, copy.as_mut_slice())?;
                    Some(copy)
                }
                false => None,
            };
            port.unmap(m.va)?;
            // Unmapped: the memory is asleep whatever the free says.
            let freed = port.free_physical(*handle);
            Ok((copy, freed))
        })();
        match result {
            Ok((copy, freed)) => {
                b.memory = Memory::Asleep(copy);
                asleep::put(m.va, m.size, asleep::region_message(&b.tag));
                given += b.size;
                if let Err(e) = freed {
                    first.get_or_insert(e);
                }
            }
            Err(e) => {
                first.get_or_insert(e);
            }
        }
    }
    first.map_or(Ok(given), Err)
}

/// A backing this wake woke, and the copy it restored from (kept until
/// the whole wake succeeded, for the rollback).
struct Woken {
    id: usize,
    copy: Option<HostCopy>,
}

/// Wakes the region memory of the tags in `tags` (`None`: every tag):
/// all of it, or none (see the module's documentation). Returns the bytes
/// mapped again.
pub fn wake_all(port: &dyn RegionPort, tags: Option<&[&str]>) -> Result<usize> {
    let chosen = |tag: &str| tags.map_or(true, |t| t.contains(&tag));
    if !none_live() {
        // As sleep does: work queued before the wake (a host function
        // freeing region memory, say) runs before the records are held, so
        // the restoring copies, which wait for queued work, find none of it.
        port.synchronize()?;
    }
    let mut books = books();
    let ids: Vec<usize> = books
        .backings
        .iter()
        .filter(|(_, b)| matches!(b.memory, Memory::Asleep(_)) && chosen(&b.tag))
        .map(|(&id, _)| id)
        .collect();
    let mut woken = Vec::with_capacity(ids.len());
    for id in ids {
        if let Err(e) = wake_one(port, &mut books, id, &mut woken) {
            roll_back(port, &mut books, woken);
            return Err(e);
        }
    }
    books.asleep_tags.retain(|t| !chosen(t));
    Ok(woken
        .iter()
        .filter_map(|w| books.backings.get(&w.id))
        .map(|b| b.size)
        .sum())
}

fn wake_one(
    port: &dyn RegionPort,
    books: &mut MappedBooks,
    id: usize,
    woken: &mut Vec<Woken>,
) -> Result<()> {
    let Some(b) = books.backings.get_mut(&id) else {
        return Ok(());
    };
    let handle = port.malloc_physical(b.size, &b.prop, b.flags)?;
    let Memory::Asleep(copy) = std::mem::replace(&mut b.memory, Memory::Awake(handle)) else {
        return Ok(());
    };
    let Some(m) = b.mapping else {
        // Unmapped while asleep: fresh memory behind the program's handle.
        woken.push(Woken { id, copy: None });
        return Ok(());
    };
    let restored = port
        .map(m.va, m.size, m.offset, handle, m.flags)
        .and_then(|()| {
            asleep::take(m.va);
            match &copy {
                Some(data) => port.write(m.va, data.as_slice()).inspect_err(|_| {
                    let _ = port.unmap(m.va);
                }),
                None => Ok(()),
            }
        });
    if let Err(e) = restored {
        asleep::put(m.va, m.size, asleep::region_message(&b.tag));
        let _ = port.free_physical(handle);
        b.memory = Memory::Asleep(copy);
        return Err(e);
    }
    woken.push(Woken { id, copy });
    Ok(())
}

/// Puts the backings of a failed wake back to sleep, with their copies.
fn roll_back(port: &dyn RegionPort, books: &mut MappedBooks, woken: Vec<Woken>) {
    for w in woken.into_iter().rev() {
        let Some(b) = books.backings.get_mut(&w.id) else {
            continue;
        };
        let Memory::Awake(handle) = b.memory else {
            continue;
        };
        if let Some(m) = b.mapping {
            let _ = port.unmap(m.va);
            asleep::put(m.va, m.size, asleep::region_message(&b.tag));
        }
        let _ = port.free_physical(handle);
        b.memory = Memory::Asleep(w.copy);
    }
}
