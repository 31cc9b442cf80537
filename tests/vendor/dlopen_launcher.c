/*
 * A program that knows nothing of ACL: it opens a library that does (the
 * inference loop of alloc_app.c built as a library needing the runtime) with
 * dlopen, the way Python, MindSpore or an inference server loading model
 * plugins do, and runs it.
 *
 *   dlopen_launcher local|global|preopen|served RUNTIME PLUGIN [MODE]
 *
 *   local    dlopen(PLUGIN, RTLD_NOW | RTLD_LOCAL)
 *   global   dlopen(PLUGIN, RTLD_NOW | RTLD_GLOBAL)
 *   preopen  dlopen(RUNTIME, RTLD_NOW | RTLD_LOCAL) by the program itself
 *            first (as code that loads libascendcl.so by name does), then
 *            PLUGIN as in local
 *   served   calls aclInit and aclFinalize first, from whatever the global
 *            scope has (under `aclalloc run`: libaclalloc, with no runtime
 *            loaded yet, so it serves as the runtime), then PLUGIN as in local
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

typedef int (*app_main_fn)(int argc, char **argv);
typedef int (*acl_fn)(const char *configPath);
typedef int (*acl_fn0)(void);

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: dlopen_launcher local|global|preopen|served RUNTIME PLUGIN [MODE]\n");
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
    return app_main(2, app_argv);
}
