/*
 * A program written and linked for CANN (-lascendcl), using only CANN's
 * functions: it runs unmodified when the loader finds aclalloc under the
 * name libascendcl.so.
 */
#include <stdio.h>
#include <string.h>

#include "acl/acl.h"
#include "common/check.h"

static int obj;
static unsigned char arena[1 << 16];
static void *arena_alloc(aclrtAllocator a, size_t size) { (void)a; return size <= sizeof arena ? arena : NULL; }
static void arena_free(aclrtAllocator a, aclrtAllocatorBlock b) { (void)a; (void)b; }
static void *arena_addr(aclrtAllocatorBlock b) { return b; }

int main(void) {
    CHECK(aclInit(NULL));
    uint32_t n = 0;
    CHECK(aclrtGetDeviceCount(&n));
    CHECK(aclrtSetDevice(0));
    aclrtStream stream = NULL;
    CHECK(aclrtCreateStream(&stream));

    aclrtAllocatorDesc desc = aclrtAllocatorCreateDesc();
    CHECK(aclrtAllocatorSetObjToDesc(desc, &obj));
    CHECK(aclrtAllocatorSetAllocFuncToDesc(desc, arena_alloc));
    CHECK(aclrtAllocatorSetFreeFuncToDesc(desc, arena_free));
    CHECK(aclrtAllocatorSetGetAddrFromBlockFuncToDesc(desc, arena_addr));
    CHECK(aclrtAllocatorRegister(stream, desc));
    aclrtAllocatorDesc found = NULL;
    CHECK(aclrtAllocatorGetByStream(stream, &found, NULL, NULL, NULL, NULL, NULL));

    const char message[] = "hello from a program linked with -lascendcl";
    char back[sizeof message] = {0};
    void *dev = NULL;
    CHECK(aclrtMalloc(&dev, sizeof message, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMemcpy(dev, sizeof message, message, sizeof message, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK(aclrtMemcpyAsync(back, sizeof back, dev, sizeof message, ACL_MEMCPY_DEVICE_TO_HOST, stream));
    CHECK(aclrtSynchronizeStream(stream));
    CHECK(aclrtFree(dev));
    CHECK(aclrtAllocatorUnregister(stream));
    CHECK(aclrtAllocatorDestroyDesc(desc));
    CHECK(aclrtDestroyStream(stream));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("%u device(s); %s\n", n, back);
    return found == desc && strcmp(back, message) == 0 ? 0 : 1;
}
