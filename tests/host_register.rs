//! Registered host memory (`aclrtHostRegister`, `aclrtHostRegisterV2`,
//! `aclrtHostGetDevicePointer`, `aclrtHostUnregister`) and managed memory (`aclrtMemAllocManaged`) on the
//! host runtime: CANN's refusals and codes, out-parameters written only on
//! success, a message for every failure.

mod common;

use aclalloc::base::error::*;
use aclalloc::ffi::cann::host_memory::*;
use aclalloc::ffi::cann::host_register::*;
use aclalloc::ffi::cann::managed_memory::*;
use aclalloc::ffi::cann::memory::*;
use aclalloc::ffi::cann::types::ACL_HBM_MEM;
use common::message;
use std::ffi::c_void;
use std::ptr::null_mut;

const MAPPED: u32 = ACL_HOST_REG_MAPPED as u32;
const PINNED: u32 = ACL_HOST_REG_PINNED as u32;
const SENTINEL: *mut c_void = 0x5a5a as *mut c_void;

/// Pageable host memory of `pages` 4 KiB pages, page-aligned.
fn pageable(pages: usize) -> Vec<u8> {
    // Over-allocate, then use the page-aligned part (see `aligned`).
    vec![0u8; (pages + 1) * 4096]
}

fn aligned(buffer: &mut [u8]) -> *mut c_void {
    let at = buffer.as_mut_ptr() as usize;
    (at.next_multiple_of(4096)) as *mut c_void
}

#[test]
fn a_mapped_range_is_its_own_device_address_until_unregistered() {
    common::device0();
    let mut buffer = pageable(4);
    let p = aligned(&mut buffer);
    // SAFETY (every call below): the pointers are valid; the runtime checks
    // the range against the process's mappings.
    unsafe {
        assert_eq!(
            aclrtHostRegisterV2(p, 4 * 4096, MAPPED | PINNED),
            ACL_SUCCESS
        );
        let mut device = SENTINEL;
        let inside = p.cast::<u8>().add(100).cast();
        assert_eq!(
            aclrtHostGetDevicePointer(inside, &mut device, 0),
            ACL_SUCCESS
        );
        assert_eq!(device, inside);
        // Overlapping ranges, from below and from inside.
        assert_eq!(
            aclrtHostRegisterV2(p.cast::<u8>().add(4096).cast(), 4096, MAPPED),
            ACL_ERROR_HOST_MEMORY_ALREADY_REGISTERED
        );
        assert!(
            message().contains("already been registered"),
            "{}",
            message()
        );
        // The flag must be 0; the out-pointer is needed; nothing written.
        let mut out = SENTINEL;
        assert_eq!(
            aclrtHostGetDevicePointer(p, &mut out, 1),
            ACL_ERROR_INVALID_PARAM
        );
        assert!(message().contains("flag"), "{}", message());
        assert_eq!(
            aclrtHostGetDevicePointer(p, null_mut(), 0),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclrtHostGetDevicePointer(null_mut(), &mut out, 0),
            ACL_ERROR_INVALID_PARAM
        );
        // Unregistering takes the range's start only.
        assert_eq!(
            aclrtHostUnregister(inside),
            ACL_ERROR_HOST_MEMORY_NOT_REGISTERED
        );
        assert_eq!(aclrtHostUnregister(p), ACL_SUCCESS);
        assert_eq!(
            aclrtHostGetDevicePointer(p, &mut out, 0),
            ACL_ERROR_HOST_MEMORY_NOT_REGISTERED
        );
        assert!(message().contains("not been registered"), "{}", message());
        assert_eq!(aclrtHostUnregister(p), ACL_ERROR_HOST_MEMORY_NOT_REGISTERED);
        assert_eq!(out, SENTINEL);
        // Pinned only: registered, but without a device address.
        assert_eq!(aclrtHostRegisterV2(p, 4096, PINNED), ACL_SUCCESS);
        assert_eq!(
            aclrtHostGetDevicePointer(p, &mut out, 0),
            ACL_ERROR_HOST_MEMORY_NOT_REGISTERED
        );
        assert!(message().contains("ACL_HOST_REG_MAPPED"), "{}", message());
        assert_eq!(aclrtHostUnregister(p), ACL_SUCCESS);
    }
}

#[test]
fn the_first_version_registers_for_the_device_and_gives_the_address() {
    common::device0();
    let mut buffer = pageable(2);
    let p = aligned(&mut buffer);
    // SAFETY (every call below): the pointers are valid; the runtime checks
    // the range against the process's mappings.
    unsafe {
        let mut device = SENTINEL;
        assert_eq!(
            aclrtHostRegister(p, 2 * 4096, ACL_HOST_REGISTER_READONLY, &mut device),
            ACL_ERROR_RT_FEATURE_NOT_SUPPORT
        );
        assert_eq!(
            aclrtHostRegister(p, 2 * 4096, 3, &mut device),
            ACL_ERROR_INVALID_PARAM
        );
        assert!(message().contains("aclrtHostRegisterType"), "{}", message());
        // NULL out-parameter: refused before anything is registered.
        assert_eq!(
            aclrtHostRegister(p, 2 * 4096, ACL_HOST_REGISTER_MAPPED, null_mut()),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(device, SENTINEL, "written only on success");
        assert_eq!(
            aclrtHostRegister(p, 2 * 4096, ACL_HOST_REGISTER_MAPPED, &mut device),
            ACL_SUCCESS
        );
        assert_eq!(device, p);
        // The same registration the second version makes.
        let mut again = SENTINEL;
        assert_eq!(
            aclrtHostGetDevicePointer(p.cast::<u8>().add(4096).cast(), &mut again, 0),
            ACL_SUCCESS
        );
        assert_eq!(
            aclrtHostRegisterV2(p, 4096, MAPPED),
            ACL_ERROR_HOST_MEMORY_ALREADY_REGISTERED
        );
        assert_eq!(aclrtHostUnregister(p), ACL_SUCCESS);
        assert_eq!(
            aclrtHostRegister(
                p.cast::<u8>().add(1).cast(),
                4096,
                ACL_HOST_REGISTER_MAPPED,
                &mut device
            ),
            ACL_ERROR_INVALID_PARAM
        );
    }
}

#[test]
fn registration_refuses_what_cann_refuses() {
    common::device0();
    let mut buffer = pageable(2);
    let p = aligned(&mut buffer);
    // SAFETY (every call below): as above.
    unsafe {
        assert_eq!(
            aclrtHostRegisterV2(null_mut(), 4096, MAPPED),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(aclrtHostRegisterV2(p, 0, MAPPED), ACL_ERROR_INVALID_PARAM);
        assert!(message().contains("size"), "{}", message());
        for flag in [0, 0x1, MAPPED | 0x100] {
            assert_eq!(
                aclrtHostRegisterV2(p, 4096, flag),
                ACL_ERROR_INVALID_PARAM,
                "{flag:#x}"
            );
            assert!(message().contains("flag"), "{}", message());
        }
        for flag in [ACL_HOST_REG_IOMEMORY, ACL_HOST_REG_READONLY] {
            assert_eq!(
                aclrtHostRegisterV2(p, 4096, flag as u32),
                ACL_ERROR_RT_FEATURE_NOT_SUPPORT
            );
        }
        assert_eq!(
            aclrtHostRegisterV2(p.cast::<u8>().add(8).cast(), 4096, MAPPED),
            ACL_ERROR_INVALID_PARAM
        );
        assert!(message().contains("4 KB"), "{}", message());
        // Memory that is not mapped in this process.
        assert_eq!(
            aclrtHostRegisterV2(0x1000 as *mut c_void, 4096, MAPPED),
            ACL_ERROR_INVALID_PARAM
        );
        assert!(message().contains("not mapped"), "{}", message());
        // aclrtMallocHost's memory is page-locked already: mapping it is
        // fine, pinning it is refused; freeing it unregisters it.
        let mut host = null_mut();
        assert_eq!(aclrtMallocHost(&mut host, 8192), ACL_SUCCESS);
        assert_eq!(
            aclrtHostRegisterV2(host, 8192, PINNED),
            ACL_ERROR_INVALID_PARAM
        );
        assert!(message().contains("page-locked"), "{}", message());
        assert_eq!(aclrtHostRegisterV2(host, 8192, MAPPED), ACL_SUCCESS);
        assert_eq!(aclrtFreeHost(host), ACL_SUCCESS);
        let mut out = SENTINEL;
        assert_eq!(
            aclrtHostGetDevicePointer(host, &mut out, 0),
            ACL_ERROR_HOST_MEMORY_NOT_REGISTERED
        );
        assert_eq!(out, SENTINEL);
    }
}

#[test]
fn managed_memory_is_device_memory_the_host_reaches() {
    common::device0();
    let mut p: *mut c_void = SENTINEL;
    // SAFETY (every call below): valid out-pointers; managed memory is
    // host memory on the host runtime.
    unsafe {
        assert_eq!(
            aclrtMemAllocManaged(&mut p, 100, 0),
            ACL_ERROR_INVALID_PARAM
        );
        assert!(
            message().contains("ACL_RT_MEM_ATTACH_GLOBAL"),
            "{}",
            message()
        );
        assert_eq!(
            aclrtMemAllocManaged(&mut p, 0, ACL_RT_MEM_ATTACH_GLOBAL),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclrtMemAllocManaged(null_mut(), 100, ACL_RT_MEM_ATTACH_GLOBAL),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(p, SENTINEL);
        let (mut free_before, mut total) = (0usize, 0usize);
        assert_eq!(
            aclrtGetMemInfo(ACL_HBM_MEM, &mut free_before, &mut total),
            ACL_SUCCESS
        );
        assert_eq!(
            aclrtMemAllocManaged(&mut p, 100, ACL_RT_MEM_ATTACH_GLOBAL),
            ACL_SUCCESS
        );
        let mut free_after = 0usize;
        assert_eq!(
            aclrtGetMemInfo(ACL_HBM_MEM, &mut free_after, &mut total),
            ACL_SUCCESS
        );
        // Whole 2 MiB units (other tests of this binary allocate nothing).
        assert!(
            free_before - free_after >= 2 << 20,
            "{free_before} {free_after}"
        );
        let bytes = std::slice::from_raw_parts_mut(p.cast::<u8>(), 2 << 20);
        bytes.fill(7);
        assert_eq!(bytes[(2 << 20) - 1], 7);
        assert_eq!(aclrtFree(p), ACL_SUCCESS);
    }
}
