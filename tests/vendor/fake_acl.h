/*
 * The ACL runtime functions the stand-in vendor runtime and the test
 * application use beyond the allocator API, with CANN's signatures, plus the
 * stand-in's own entry points. Redeclaring a function aclalloc.h also
 * declares is harmless in C (the declarations are identical).
 */
#ifndef FAKE_ACL_H
#define FAKE_ACL_H

#include <stddef.h>
#include <stdint.h>
#include "acl/acl.h"

#ifdef __cplusplus
extern "C" {
#endif

aclError aclInit(const char *configPath);
aclError aclFinalize(void);
aclError aclrtSetDevice(int32_t deviceId);
aclError aclrtResetDevice(int32_t deviceId);
aclError aclrtGetDevice(int32_t *deviceId);
aclError aclrtCreateStream(aclrtStream *stream);
aclError aclrtDestroyStream(aclrtStream stream);
aclError aclrtSynchronizeStream(aclrtStream stream);
typedef void *aclrtEvent;
aclError aclrtCreateEvent(aclrtEvent *event);
aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream);
aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event);
aclError aclrtDestroyEvent(aclrtEvent event);

/* The host runtime's launch extension: an operator with a workspace. The
 * stand-in vendor runtime implements it with its executor, so that one
 * application runs against either. */
typedef void (*aclallocKernelFunc)(void *workspace, size_t size, void *userData);
aclError aclallocLaunchKernel(aclrtStream stream, size_t workspaceSize,
                              aclallocKernelFunc kernel, void *userData);

/* Stand-in vendor only: the same launch, but the executor finds the stream's
 * allocator by calling the exported aclrtAllocatorGetByStream, resolved at
 * run time (dlsym(RTLD_DEFAULT)), as a runtime built from several libraries
 * does. */
typedef aclError (*fakeExecuteViaGetByStreamFunc)(aclrtStream stream, size_t workspaceSize,
                                                  aclallocKernelFunc kernel, void *userData);

/* Stand-in vendor only: what its executor did. */
typedef struct {
    uint64_t launches_internal; /* launches that used the internal table */
    uint64_t launches_exported; /* launches that used aclrtAllocatorGetByStream */
    uint64_t allocs;            /* alloc callbacks called */
    uint64_t frees;             /* free callbacks called */
    uint64_t get_addrs;         /* getAddrFromBlock callbacks called */
    uint64_t synchronizes;      /* aclrtSynchronizeStream calls */
} fakeVendorCounters;
typedef void (*fakeVendorGetCountersFunc)(fakeVendorCounters *out);

/* Stand-in vendor only: a complete descriptor made inside the runtime. */
typedef aclrtAllocatorDesc (*fakeCreateFilledDescFunc)(void *obj, aclrtAllocatorAllocFunc alloc,
                                                       aclrtAllocatorFreeFunc release,
                                                       aclrtAllocatorGetAddrFromBlockFunc get_addr);

/* Stand-in vendor only: virtual-memory calls that reached it. */
typedef uint64_t (*fakeVendorVmCallsFunc)(void);

#ifdef __cplusplus
}
#endif
#endif
