/*
 * Statistics of aclrtMallocHost memory with PyTorch's host-allocator keys
 * (torch.npu.host_memory_stats()): blocks and bytes held, the calls and
 * their times, and the two resets.
 */
#include <stdio.h>

#include "acl/acl.h"
#include "aclalloc.h"
#include "common/expect.h"

int main(void) {
    EXPECT(aclInit(NULL) == ACL_SUCCESS);
    aclallocHostMemoryStats before, s;
    EXPECT(aclallocHostMemoryGetStats(&before) == ACL_SUCCESS);
    void *a = NULL, *b = NULL;
    EXPECT(aclrtMallocHost(&a, 1000) == ACL_SUCCESS);
    EXPECT(aclrtMallocHost(&b, 3000) == ACL_SUCCESS);
    EXPECT(aclrtFreeHost(b) == ACL_SUCCESS);
    EXPECT(aclallocHostMemoryGetStats(&s) == ACL_SUCCESS);
    printf("held %lld bytes in %lld blocks (peak %lld bytes); %lld allocs, %lld frees, "
           "%lld us allocating\n",
           (long long)s.allocated_bytes.current, (long long)s.allocations.current,
           (long long)s.allocated_bytes.peak, (long long)s.num_host_alloc,
           (long long)s.num_host_free, (long long)s.host_alloc_time.total);
    EXPECT(s.allocated_bytes.current - before.allocated_bytes.current == 1000);
    EXPECT(s.allocated_bytes.peak - before.allocated_bytes.current >= 4000);
    EXPECT(s.num_host_alloc - before.num_host_alloc == 2 && s.host_alloc_time.count >= 2);
    EXPECT(s.active_bytes.current == s.allocated_bytes.current);

    EXPECT(aclallocHostMemoryResetPeakStats() == ACL_SUCCESS);
    EXPECT(aclallocHostMemoryResetAccumulatedStats() == ACL_SUCCESS);
    EXPECT(aclallocHostMemoryEmptyCache() == ACL_SUCCESS);
    EXPECT(aclallocHostMemoryGetStats(&s) == ACL_SUCCESS);
    EXPECT(s.allocated_bytes.peak == s.allocated_bytes.current);
    EXPECT(s.num_host_alloc == 0 && s.allocated_bytes.allocated == 0);
    EXPECT(aclallocHostMemoryGetStats(NULL) == ACL_ERROR_INVALID_PARAM);

    EXPECT(aclrtFreeHost(a) == ACL_SUCCESS);
    EXPECT(aclFinalize() == ACL_SUCCESS);
    printf("%s\n", failures == 0 ? "host memory stats: ok" : "host memory stats: FAILED");
    return failures == 0 ? 0 : 1;
}
