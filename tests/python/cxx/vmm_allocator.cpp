// A pluggable allocator in the shape of a serving engine's: every block is
// its own reservation of device address space with physical memory mapped
// into it (CANN's virtual-memory API). vmm_sleep unmaps and frees the
// physical memory of every block (copying it to host memory first when
// asked) and keeps the addresses reserved; vmm_wake maps new physical
// memory at the same addresses and restores what was copied. Built with
// `g++ -shared` and no -l: the aclrt* symbols come from the libaclalloc the
// Python package loaded with RTLD_GLOBAL.
#include <sys/types.h>

#include <cstddef>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "acl/acl.h"

namespace {

struct Block {
    size_t size;
    int device;
    aclrtDrvMemHandle physical;  // NULL while asleep
    std::vector<char> saved;     // contents kept over a sleep
};

std::mutex lock;
std::unordered_map<void *, Block> blocks;
long failures;

aclrtPhysicalMemProp prop_of(int device) {
    aclrtPhysicalMemProp prop;
    std::memset(&prop, 0, sizeof prop);
    prop.handleType = ACL_MEM_HANDLE_TYPE_NONE;
    prop.allocationType = ACL_MEM_ALLOCATION_TYPE_PINNED;
    prop.memAttr = ACL_HBM_MEM_HUGE;
    prop.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = static_cast<uint32_t>(device);
    return prop;
}

size_t rounded(size_t size, int device) {
    aclrtPhysicalMemProp prop = prop_of(device);
    size_t granularity = 0;
    if (aclrtMemGetAllocationGranularity(&prop, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM,
                                         &granularity) != ACL_SUCCESS ||
        granularity == 0)
        return 0;
    return (size + granularity - 1) / granularity * granularity;
}

// Physical memory for `block`, mapped at `ptr`.
bool map_new(void *ptr, Block &block) {
    aclrtPhysicalMemProp prop = prop_of(block.device);
    aclrtDrvMemHandle physical = nullptr;
    if (aclrtMallocPhysical(&physical, block.size, &prop, 0) != ACL_SUCCESS) return false;
    if (aclrtMapMem(ptr, block.size, 0, physical, 0) != ACL_SUCCESS) {
        aclrtFreePhysical(physical);
        return false;
    }
    block.physical = physical;
    return true;
}

void unmap(void *ptr, Block &block) {
    if (block.physical == nullptr) return;
    if (aclrtUnmapMem(ptr) != ACL_SUCCESS || aclrtFreePhysical(block.physical) != ACL_SUCCESS)
        ++failures;
    block.physical = nullptr;
}

}  // namespace

extern "C" {

void *vmm_malloc(ssize_t size, int device, aclrtStream stream) {
    (void)stream;
    if (size <= 0) return nullptr;
    size_t bytes = rounded(static_cast<size_t>(size), device);
    if (bytes == 0) return nullptr;
    void *ptr = nullptr;
    if (aclrtReserveMemAddress(&ptr, bytes, 0, nullptr, 0) != ACL_SUCCESS) return nullptr;
    Block block{bytes, device, nullptr, {}};
    if (!map_new(ptr, block)) {
        aclrtReleaseMemAddress(ptr);
        return nullptr;
    }
    std::lock_guard<std::mutex> guard(lock);
    blocks.emplace(ptr, std::move(block));
    return ptr;
}

void vmm_free(void *ptr, ssize_t size, int device, aclrtStream stream) {
    (void)size;
    (void)device;
    (void)stream;
    std::lock_guard<std::mutex> guard(lock);
    auto found = blocks.find(ptr);
    if (found == blocks.end()) {
        ++failures;
        return;
    }
    unmap(ptr, found->second);
    if (aclrtReleaseMemAddress(ptr) != ACL_SUCCESS) ++failures;
    blocks.erase(found);
}

// Gives back the physical memory of every block; with `offload`, copies
// the contents to host memory first. Returns the blocks put to sleep.
long vmm_sleep(int offload) {
    std::lock_guard<std::mutex> guard(lock);
    long slept = 0;
    for (auto &entry : blocks) {
        Block &block = entry.second;
        if (block.physical == nullptr) continue;
        if (offload) {
            block.saved.resize(block.size);
            if (aclrtMemcpy(block.saved.data(), block.size, entry.first, block.size,
                            ACL_MEMCPY_DEVICE_TO_HOST) != ACL_SUCCESS)
                ++failures;
        }
        unmap(entry.first, block);
        ++slept;
    }
    return slept;
}

// Maps new physical memory at every sleeping block's address and restores
// offloaded contents. Returns the blocks woken.
long vmm_wake(void) {
    std::lock_guard<std::mutex> guard(lock);
    long woken = 0;
    for (auto &entry : blocks) {
        Block &block = entry.second;
        if (block.physical != nullptr) continue;
        if (!map_new(entry.first, block)) {
            ++failures;
            continue;
        }
        if (!block.saved.empty()) {
            if (aclrtMemcpy(entry.first, block.size, block.saved.data(), block.size,
                            ACL_MEMCPY_HOST_TO_DEVICE) != ACL_SUCCESS)
                ++failures;
            std::vector<char>().swap(block.saved);
        }
        ++woken;
    }
    return woken;
}

long vmm_blocks(void) {
    std::lock_guard<std::mutex> guard(lock);
    return static_cast<long>(blocks.size());
}

long vmm_failures(void) {
    std::lock_guard<std::mutex> guard(lock);
    return failures;
}

}  // extern "C"
