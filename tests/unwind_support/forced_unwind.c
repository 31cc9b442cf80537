/*
 * A thread that ends through pthread_exit or pthread_cancel inside a
 * callback the library calls: the descriptor's alloc or free callback, or
 * a kernel (on the stream's worker); the thread that ends is whichever
 * runs the callback, so the launching thread ends with 7 or
 * PTHREAD_CANCELED, or returns 1 when the worker was the one. argv[1]:
 * alloc | free | kernel; argv[2]: exit | cancel. The thread must end with
 * its value, and then the main thread keeps using the same stream and
 * allocator: every block handed out is given back exactly once.
 * alloc-cleanup: the alloc callback ends the thread inside its own
 * pthread_cleanup_push, and the launching thread called the library inside
 * one of its own; both handlers must run, in that order.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aclalloc.h"

static atomic_int live, ran;
static atomic_int end_in; /* 1: alloc, 2: free, 3: kernel, 4: alloc in a cleanup scope; reset when used */
static atomic_int inner_ran, outer_ran;
static int cancel;

static void end_thread(void) {
    if (cancel) {
        pthread_cancel(pthread_self());
        pthread_testcancel();
    }
    pthread_exit((void *)7);
}

/* C's pthread_cleanup_push registers a cancellation buffer with glibc,
 * which the forced unwind leaves behind in frames that are gone. */
static void inner_cleanup(void *arg) {
    (void)arg;
    inner_ran++;
}
static void outer_cleanup(void *arg) {
    (void)arg;
    if (inner_ran == 1) outer_ran++;
}
static void end_thread_in_scope(void) {
    pthread_cleanup_push(inner_cleanup, NULL);
    end_thread();
    pthread_cleanup_pop(0);
}

static void *my_alloc(aclrtAllocator a, size_t size) {
    (void)a;
    int one = 1, four = 4;
    if (atomic_compare_exchange_strong(&end_in, &one, 0)) end_thread();
    if (atomic_compare_exchange_strong(&end_in, &four, 0)) end_thread_in_scope();
    live++;
    return malloc(size);
}
static void my_free(aclrtAllocator a, aclrtAllocatorBlock block) {
    (void)a;
    live--;
    free(block);
    int two = 2;
    if (atomic_compare_exchange_strong(&end_in, &two, 0)) end_thread();
}
static void *my_addr(aclrtAllocatorBlock block) { return block; }
static void kernel(void *ws, size_t size, void *u) {
    (void)ws, (void)size, (void)u;
    int three = 3;
    if (atomic_compare_exchange_strong(&end_in, &three, 0)) end_thread();
    ran++;
}

static aclrtStream stream;
static aclallocPluggable plugin;
static void *user(void *arg);

static void *plugin_user(void *arg) {
    (void)arg;
    void *block = NULL;
    aclallocPluggableMalloc(plugin, &block, 256, NULL);
    return (void *)1;
}

/* A pluggable allocator's alloc ends the thread; then this thread goes on. */
static int plugin_case(const char *so, int through_launch) {
    void *lib = dlopen(so, RTLD_NOW);
    if (lib == NULL) return 30;
    void (*arm)(int) = (void (*)(int))dlsym(lib, "exiting_plugin_arm");
    int (*live_blocks)(void) = (int (*)(void))dlsym(lib, "exiting_plugin_live");
    aclallocPluggableConfig config;
    memset(&config, 0, sizeof config);
    config.path = so;
    config.allocSymbol = "exiting_malloc";
    config.freeSymbol = "exiting_free";
    aclrtAllocatorDesc desc = NULL;
    if (aclallocPluggableCreate(&config, &plugin, &desc) != ACL_SUCCESS) return 31;
    if (through_launch && aclrtAllocatorRegister(stream, desc) != ACL_SUCCESS) return 32;
    arm(cancel ? 2 : 1);
    pthread_t t;
    void *value = NULL;
    pthread_create(&t, NULL, through_launch ? user : plugin_user, NULL);
    pthread_join(t, &value);
    void *expected = cancel ? PTHREAD_CANCELED : (void *)7;
    if (value != expected) {
        printf("the thread ended with %p, not %p\n", value, expected);
        return 33;
    }
    for (int i = 0; i < 8; i++) {
        void *block = NULL;
        if (aclallocPluggableMalloc(plugin, &block, 512, NULL) != ACL_SUCCESS) return 34;
        if (aclallocPluggableFree(plugin, block) != ACL_SUCCESS) return 35;
        if (aclallocLaunchKernel(stream, 512, kernel, NULL) != ACL_SUCCESS) return 36;
    }
    if (aclrtSynchronizeStream(stream) != ACL_SUCCESS) return 37;
    if (aclrtDestroyStream(stream) != ACL_SUCCESS) return 38;
    aclallocAllocatorStats stats;
    if (aclallocPluggableGetStats(plugin, &stats) != ACL_SUCCESS) return 39;
    if (stats.activeCount != 0 || live_blocks() != 0) {
        printf("%llu blocks live, %d for the plugin\n", (unsigned long long)stats.activeCount, live_blocks());
        return 40;
    }
    printf("ok\n");
    return 0;
}

static void *user(void *arg) {
    (void)arg;
    for (int i = 0; i < 4; i++) {
        aclallocLaunchKernel(stream, 256, kernel, NULL);
        aclrtSynchronizeStream(stream);
    }
    return (void *)1;
}

static void *user_in_scope(void *arg) {
    void *value = (void *)1;
    pthread_cleanup_push(outer_cleanup, NULL);
    value = user(arg);
    pthread_cleanup_pop(0);
    return value;
}

int main(int argc, char **argv) {
    if (argc != 3 && argc != 4) return 10;
    cancel = strcmp(argv[2], "cancel") == 0;
    if (aclInit(NULL) != ACL_SUCCESS || aclrtSetDevice(0) != ACL_SUCCESS) return 11;
    if (aclrtCreateStream(&stream) != ACL_SUCCESS) return 12;
    if (argc == 4) return plugin_case(argv[3], strcmp(argv[1], "plugin-launch") == 0);
    aclrtAllocatorDesc desc = aclrtAllocatorCreateDesc();
    aclrtAllocatorSetObjToDesc(desc, (aclrtAllocator)&live);
    aclrtAllocatorSetAllocFuncToDesc(desc, my_alloc);
    aclrtAllocatorSetFreeFuncToDesc(desc, my_free);
    aclrtAllocatorSetGetAddrFromBlockFuncToDesc(desc, my_addr);
    if (aclrtAllocatorRegister(stream, desc) != ACL_SUCCESS) return 13;

    int in_scope = strcmp(argv[1], "alloc-cleanup") == 0;
    end_in = strcmp(argv[1], "alloc") == 0 ? 1 : strcmp(argv[1], "free") == 0 ? 2 : in_scope ? 4 : 3;
    pthread_t t;
    void *value = NULL;
    pthread_create(&t, NULL, in_scope ? user_in_scope : user, NULL);
    pthread_join(t, &value);
    void *expected = cancel ? PTHREAD_CANCELED : (void *)7;
    if (end_in != 0 || (value != expected && value != (void *)1)) {
        printf("the thread ended with %p, not %p\n", value, expected);
        return 20;
    }
    if (in_scope && (value != expected || inner_ran != 1 || outer_ran != 1)) {
        printf("cleanup handlers: inner %d, outer %d (thread ended with %p)\n", (int)inner_ran,
               (int)outer_ran, value);
        return 27;
    }
    /* The stream and the allocator go on serving, from this thread. */
    if (aclrtSynchronizeStream(stream) != ACL_SUCCESS) return 26;
    int before = ran;
    for (int i = 0; i < 8; i++) {
        if (aclallocLaunchKernel(stream, 512, kernel, NULL) != ACL_SUCCESS) return 21;
    }
    if (aclrtSynchronizeStream(stream) != ACL_SUCCESS) return 22;
    if (ran != before + 8) {
        printf("%d kernels ran, not 8\n", ran - before);
        return 23;
    }
    if (aclrtDestroyStream(stream) != ACL_SUCCESS) return 24;
    if (live != 0) {
        printf("%d blocks were not given back\n", (int)live);
        return 25;
    }
    printf("ok\n");
    return 0;
}
