/*
 * A service stopped by a signal: it runs a launch whose workspace comes
 * from a pool registered on its stream (so the tracking report has an
 * allocation to count), prints its pid and "ready", and waits to be
 * stopped.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <unistd.h>

#include "aclalloc.h"

static void nothing(void *workspace, size_t size, void *data) {
    (void)workspace;
    (void)size;
    (void)data;
}

int main(void) {
    if (aclInit(NULL) != ACL_SUCCESS || aclrtSetDevice(0) != ACL_SUCCESS) {
        return 1;
    }
    aclrtStream stream = NULL;
    aclallocPool pool = NULL;
    aclrtAllocatorDesc desc = NULL;
    if (aclrtCreateStream(&stream) != ACL_SUCCESS ||
        aclallocPoolCreate(NULL, &pool, &desc) != ACL_SUCCESS ||
        aclrtAllocatorRegister(stream, desc) != ACL_SUCCESS ||
        aclallocLaunchKernel(stream, 1 << 20, nothing, NULL) != ACL_SUCCESS ||
        aclrtSynchronizeStream(stream) != ACL_SUCCESS) {
        return 1;
    }
    printf("pid %d ready\n", (int)getpid());
    fflush(stdout);
    for (;;) {
        pause();
    }
}
