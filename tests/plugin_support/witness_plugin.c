/*
 * A minimal pluggable allocator that writes what happens to it to a file
 * (WITNESS_PATH, given when it is compiled): "empty_cache" when its
 * empty-cache hook runs, "unloaded" when the object is unloaded (its
 * destructor runs at dlclose). The test reads the order back.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>

#define PLUGIN_EXPORT __attribute__((visibility("default")))

static void witness(const char *what) {
    FILE *f = fopen(WITNESS_PATH, "a");
    if (f == NULL) abort();
    fprintf(f, "%s\n", what);
    fclose(f);
}

PLUGIN_EXPORT void *witness_malloc(ssize_t size, int device, void *stream) {
    (void)device;
    (void)stream;
    return malloc((size_t)size);
}

PLUGIN_EXPORT void witness_free(void *ptr, ssize_t size, int device, void *stream) {
    (void)size;
    (void)device;
    (void)stream;
    free(ptr);
}

PLUGIN_EXPORT void witness_empty_cache(void) { witness("empty_cache"); }

__attribute__((destructor)) static void unloaded(void) { witness("unloaded"); }
