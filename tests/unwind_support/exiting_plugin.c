/*
 * A pluggable allocator whose alloc ends the calling thread once, when
 * exiting_plugin_arm(how) armed it (1: pthread_exit, 2: pthread_cancel);
 * for tests/unwind_support/forced_unwind.c.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/types.h>

static atomic_int armed;
static atomic_int live;

void exiting_plugin_arm(int how) { armed = how; }
int exiting_plugin_live(void) { return live; }

void *exiting_malloc(ssize_t size, int device, void *stream) {
    (void)device, (void)stream;
    int how = atomic_exchange(&armed, 0);
    if (how == 2) {
        pthread_cancel(pthread_self());
        pthread_testcancel();
    }
    if (how != 0) pthread_exit((void *)7);
    live++;
    return malloc((size_t)size);
}

void exiting_free(void *ptr, ssize_t size, int device, void *stream) {
    (void)size, (void)device, (void)stream;
    live--;
    free(ptr);
}
