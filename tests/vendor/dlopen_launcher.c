/*
 * A program that knows nothing of ACL: it opens a library that does (the
 * inference loop of alloc_app.c built as a library needing the runtime) with
 * dlopen, the way Python, MindSpore or an inference server loading model
 * plugins do, and runs it.
 *
 *   dlopen_launcher local|global|preopen|served|descfirst RUNTIME PLUGIN [MODE]
 *
 *   local    dlopen(PLUGIN, RTLD_NOW | RTLD_LOCAL)
 *   global   dlopen(PLUGIN, RTLD_NOW | RTLD_GLOBAL)
 *   preopen  dlopen(RUNTIME, RTLD_NOW | RTLD_LOCAL) by the program itself
 *            first (as code that loads libascendcl.so by name does), then
 *            PLUGIN as in local
 *   served   calls aclInit and aclFinalize first, from whatever the global
 *            scope has (under `aclalloc run`: libaclalloc, with no runtime
 *            loaded yet, so it serves as the runtime), then PLUGIN as in local
 *   descfirst
 *            makes an allocator descriptor first, from whatever the global
 *            scope has (under `aclalloc run`: libaclalloc; a descriptor
 *            needs no runtime, so this decides nothing), then PLUGIN as in
 *            local; afterwards registers that early descriptor on a new
 *            stream, launches on it and destroys it, printing what happened
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

typedef int (*app_main_fn)(int argc, char **argv);
typedef int (*acl_fn)(const char *configPath);
typedef int (*acl_fn0)(void);
typedef void *(*create_desc_fn)(void);
typedef int (*set_fn)(void *desc, void *value);
typedef int (*stream_fn)(void **stream);
typedef int (*register_fn)(void *stream, void *desc);
typedef int (*unregister_fn)(void *stream);
typedef void (*kernel_fn)(void *workspace, size_t size, void *userData);
typedef int (*launch_fn)(void *stream, size_t size, kernel_fn kernel, void *userData);

/* The early descriptor's allocator: one static block, counted. */
static char early_block[8192];
static int early_allocs, early_frees, early_kernels;
static void *early_alloc(void *obj, size_t size) {
    (void)obj;
    if (size > sizeof early_block) return NULL;
    early_allocs++;
    return early_block;
}
static void early_free(void *obj, void *block) {
    (void)obj, (void)block;
    early_frees++;
}
static void *early_addr(void *block) { return block; }
static void early_kernel(void *workspace, size_t size, void *userData) {
    (void)userData;
    if (workspace != NULL && size > 0) early_kernels++;
}

#define GLOBAL(type, name) ((type)dlsym(RTLD_DEFAULT, name))

/* After the plugin ran: the descriptor made before the runtime was loaded,
 * used on a stream of the runtime found since. */
static int use_early_descriptor(void *desc) {
    set_fn set_obj = GLOBAL(set_fn, "aclrtAllocatorSetObjToDesc");
    set_fn set_alloc = GLOBAL(set_fn, "aclrtAllocatorSetAllocFuncToDesc");
    set_fn set_free = GLOBAL(set_fn, "aclrtAllocatorSetFreeFuncToDesc");
    set_fn set_addr = GLOBAL(set_fn, "aclrtAllocatorSetGetAddrFromBlockFuncToDesc");
    stream_fn create = GLOBAL(stream_fn, "aclrtCreateStream");
    register_fn reg = GLOBAL(register_fn, "aclrtAllocatorRegister");
    unregister_fn unreg = GLOBAL(unregister_fn, "aclrtAllocatorUnregister");
    launch_fn launch = GLOBAL(launch_fn, "aclallocLaunchKernel");
    unregister_fn destroy_desc = GLOBAL(unregister_fn, "aclrtAllocatorDestroyDesc");
    void *stream = NULL;
    int set = set_obj(desc, early_block) == 0 && set_alloc(desc, (void *)early_alloc) == 0 &&
              set_free(desc, (void *)early_free) == 0 && set_addr(desc, (void *)early_addr) == 0;
    int made = create(&stream) == 0;
    int registered = made && reg(stream, desc) == 0;
    int launched = registered && launch(stream, 4096, early_kernel, NULL) == 0;
    int unregistered = registered && unreg(stream) == 0;
    int destroyed = destroy_desc(desc) == 0;
    printf("early descriptor: set=%d registered=%d launched=%d unregistered=%d destroyed=%d "
           "allocs=%d frees=%d kernels=%d\n",
           set, registered, launched, unregistered, destroyed, early_allocs, early_frees,
           early_kernels);
    return set && registered && launched && unregistered && destroyed ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: dlopen_launcher local|global|preopen|served|descfirst RUNTIME PLUGIN [MODE]\n");
        return 2;
    }
    const char *how = argv[1];
    int flags = RTLD_NOW | (strcmp(how, "global") == 0 ? RTLD_GLOBAL : RTLD_LOCAL);
    if (strcmp(how, "preopen") == 0 && dlopen(argv[2], RTLD_NOW | RTLD_LOCAL) == NULL) {
        fprintf(stderr, "dlopen_launcher: %s\n", dlerror());
        return 2;
    }
    if (strcmp(how, "served") == 0) {
        acl_fn init = (acl_fn)dlsym(RTLD_DEFAULT, "aclInit");
        acl_fn0 finalize = (acl_fn0)dlsym(RTLD_DEFAULT, "aclFinalize");
        if (init == NULL || finalize == NULL || init(NULL) != 0 || finalize() != 0) {
            fprintf(stderr, "dlopen_launcher: no working aclInit/aclFinalize in the global scope\n");
            return 2;
        }
    }
    void *early = NULL;
    if (strcmp(how, "descfirst") == 0) {
        create_desc_fn create = GLOBAL(create_desc_fn, "aclrtAllocatorCreateDesc");
        early = create != NULL ? create() : NULL;
    }
    void *plugin = dlopen(argv[3], flags);
    if (plugin == NULL) {
        fprintf(stderr, "dlopen_launcher: %s\n", dlerror());
        return 2;
    }
    app_main_fn app_main = (app_main_fn)dlsym(plugin, "alloc_app_main");
    if (app_main == NULL) {
        fprintf(stderr, "dlopen_launcher: %s\n", dlerror());
        return 2;
    }
    char *app_argv[] = {argv[3], argc > 4 ? argv[4] : "clean", NULL};
    int rc = app_main(2, app_argv);
    if (rc == 0 && early != NULL) rc = use_early_descriptor(early);
    return rc;
}
