/*
 * A plugin host: it loads libaclalloc with dlopen, a helper thread creates a
 * stream and runs work on it, and the host closes the library while the
 * stream's worker thread is alive. Repeated 50 times; the process must not
 * crash (the library stays mapped while its threads run: it is linked with
 * -z nodelete, see docs/HARDENING.md).
 */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "acl/acl.h"
#include "aclalloc.h"

typedef aclError (*init_fn)(const char *);
typedef aclError (*set_device_fn)(int32_t);
typedef aclError (*create_stream_fn)(aclrtStream *);
typedef aclError (*launch_fn)(aclrtStream, size_t, aclallocKernelFunc, void *);

struct api {
    set_device_fn set_device;
    create_stream_fn create_stream;
    launch_fn launch;
    int ok;
    int round;
};

static void nothing(void *ws, size_t size, void *data) {
    (void)ws;
    (void)size;
    (void)data;
}

static void *helper(void *arg) {
    struct api *api = arg;
    aclrtStream stream = NULL;
    api->ok = api->set_device(0) == ACL_SUCCESS && api->create_stream(&stream) == ACL_SUCCESS;
    /* Odd rounds: the library is closed while the new worker thread is
     * still starting. Even rounds: while it runs queued work. */
    if (api->round % 2) {
        return NULL;
    }
    for (int i = 0; i < 64 && api->ok; i++) {
        api->ok = api->launch(stream, 0, nothing, NULL) == ACL_SUCCESS;
    }
    return NULL;
}

int main(void) {
    for (int round = 0; round < 50; round++) {
        void *lib = dlopen(ACLALLOC_LIBRARY, RTLD_NOW | RTLD_LOCAL);
        if (!lib) {
            fprintf(stderr, "dlopen: %s\n", dlerror());
            return 1;
        }
        struct api api = {0};
        api.round = round;
        init_fn init = (init_fn)dlsym(lib, "aclInit");
        api.set_device = (set_device_fn)dlsym(lib, "aclrtSetDevice");
        api.create_stream = (create_stream_fn)dlsym(lib, "aclrtCreateStream");
        api.launch = (launch_fn)dlsym(lib, "aclallocLaunchKernel");
        if (!init || !api.set_device || !api.create_stream || !api.launch) {
            fprintf(stderr, "dlsym: %s\n", dlerror());
            return 1;
        }
        if (round == 0 && init(NULL) != ACL_SUCCESS) {
            fprintf(stderr, "aclInit failed\n");
            return 1;
        }
        pthread_t t;
        if (pthread_create(&t, NULL, helper, &api) != 0 || pthread_join(t, NULL) != 0) {
            fprintf(stderr, "pthread failed\n");
            return 1;
        }
        if (!api.ok) {
            fprintf(stderr, "round %d: a call on the helper thread failed\n", round);
            return 1;
        }
        if (dlclose(lib) != 0) {
            fprintf(stderr, "dlclose: %s\n", dlerror());
            return 1;
        }
    }
    printf("50 rounds of dlopen, a stream from a helper thread, dlclose: ok\n");
    return 0;
}
