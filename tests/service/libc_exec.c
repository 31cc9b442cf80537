/*
 * A program linked with -laclalloc, for tests/install.rs: each function of
 * libc's exec and spawn family it calls is libc's own (libaclalloc.so takes
 * none of them), then it execs argv[1] with execl. Prints the first name
 * that is not libc's and exits 1.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>

#include "aclalloc.h"

int main(int argc, char **argv) {
    static const char *const family[] = {"execve",  "execv",       "execvp", "execvpe",
                                         "fexecve", "execl",       "execle", "execlp",
                                         "posix_spawn", "posix_spawnp", "system", "popen"};
    /* Linked for real: the library is loaded and initialised. */
    if (aclallocTrackingIsEnabled() < 0) return 1;
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    if (libc == NULL) return 1;
    for (size_t i = 0; i < sizeof family / sizeof family[0]; i++) {
        if (dlsym(RTLD_DEFAULT, family[i]) != dlsym(libc, family[i])) {
            printf("%s is not libc's\n", family[i]);
            return 1;
        }
    }
    if (argc > 1) execl(argv[1], argv[1], (char *)NULL);
    return 0;
}
