/*
 * The ways a tracked program ends, for tests/exit_paths.rs. It takes a block
 * through the callbacks a runtime gets for its stream and never frees it (a
 * leak of 4242 bytes, or of 12345 bytes whose address is never asked), prints
 * its pid and "ready", then (argv[1]):
 *   raise          raises SIGTERM on the main thread
 *   raise-thread   raises SIGTERM on another thread
 *   wait           waits to be stopped from outside
 *   exec           execs /bin/true (argv[2]: execv, execve, execvp, execvpe,
 *                  fexecve, execl, execlp, or execle with an environment
 *                  of only PATH)
 *   spawn          starts itself in mode "plain" and waits for it (argv[2]:
 *                  posix_spawn or posix_spawnp with an environment of only
 *                  PATH, system or popen), then returns
 *   plain          returns
 *   exec-missing   execs a file that does not exist, then returns
 *   fork-exec      forks a child that execs /bin/true, waits for it, returns
 *   chdir          changes to / and returns
 *   unaddressed    returns (the leaked block's address was never asked)
 *   default        allocates from the default pool and launches a kernel
 * A line after a raise or an exec means the program went on.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "acl/acl.h"
#include "aclalloc.h"

extern char **environ;

static void *host_alloc(aclrtAllocator allocator, size_t size) {
    (void)allocator;
    return malloc(size);
}
static void host_free(aclrtAllocator allocator, aclrtAllocatorBlock block) {
    (void)allocator;
    free(block);
}
static void *host_addr(aclrtAllocatorBlock block) { return block; }

/* What an executor does: the callbacks of the stream, then one block. */
static int leak(size_t size, int addressed) {
    static int stream_storage;
    aclrtStream stream = &stream_storage;
    aclrtAllocatorDesc desc = aclrtAllocatorCreateDesc();
    aclrtAllocatorSetObjToDesc(desc, &stream_storage);
    aclrtAllocatorSetAllocFuncToDesc(desc, host_alloc);
    aclrtAllocatorSetFreeFuncToDesc(desc, host_free);
    aclrtAllocatorSetGetAddrFromBlockFuncToDesc(desc, host_addr);
    if (aclrtAllocatorRegister(stream, desc) != ACL_SUCCESS) return 1;
    aclrtAllocatorDesc found = NULL;
    aclrtAllocator obj = NULL;
    aclrtAllocatorAllocFunc alloc = NULL;
    aclrtAllocatorFreeFunc release = NULL;
    aclrtAllocatorGetAddrFromBlockFunc addr = NULL;
    if (aclrtAllocatorGetByStream(stream, &found, &obj, &alloc, &release, NULL, &addr) !=
        ACL_SUCCESS)
        return 1;
    void *block = alloc(obj, size);
    if (block == NULL) return 1;
    if (addressed && addr(block) == NULL) return 1;
    return 0;
}

static void nothing(void *workspace, size_t size, void *data) {
    (void)workspace;
    (void)size;
    (void)data;
}

static void *raiser(void *arg) {
    raise(SIGTERM);
    return arg;
}

/* An environment without the variables the program was started with. */
static char *only_path[] = {"PATH=/usr/bin:/bin", NULL};

static int exec_true(const char *how) {
    char *args[] = {"true", NULL};
    if (strcmp(how, "execve") == 0) execve("/bin/true", args, environ);
    if (strcmp(how, "execvp") == 0) execvp("true", args);
    if (strcmp(how, "execvpe") == 0) execvpe("true", args, environ);
    if (strcmp(how, "execl") == 0) execl("/bin/true", "true", (char *)NULL);
    if (strcmp(how, "execlp") == 0) execlp("true", "true", (char *)NULL);
    if (strcmp(how, "execle") == 0) execle("/bin/true", "true", (char *)NULL, only_path);
    if (strcmp(how, "fexecve") == 0) {
        int fd = open("/bin/true", O_RDONLY | O_CLOEXEC);
        if (fd >= 0) fexecve(fd, args, environ);
    }
    execv("/bin/true", args);
    perror("exec");
    return 100;
}

/* Starts this program (`self`) in mode "plain" by `how` and waits for it. */
static int spawn_plain(const char *self, const char *how) {
    char *args[] = {(char *)self, "plain", NULL};
    pid_t child = -1;
    int status = -1;
    if (strcmp(how, "posix_spawn") == 0 || strcmp(how, "posix_spawnp") == 0) {
        int rc = strcmp(how, "posix_spawn") == 0
                     ? posix_spawn(&child, self, NULL, NULL, args, only_path)
                     : posix_spawnp(&child, self, NULL, NULL, args, only_path);
        if (rc != 0 || waitpid(child, &status, 0) != child) return 1;
    } else {
        char command[4096];
        snprintf(command, sizeof command, "'%s' plain", self);
        if (strcmp(how, "system") == 0) {
            status = system(command);
        } else {
            FILE *pipe = popen(command, "r");
            if (pipe == NULL) return 1;
            char line[256];
            while (fgets(line, sizeof line, pipe) != NULL) fputs(line, stdout);
            status = pclose(pipe);
        }
    }
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    setvbuf(stdout, NULL, _IONBF, 0); /* a line after a raise shows at once */
    int unaddressed = strcmp(mode, "unaddressed") == 0;
    if (leak(unaddressed ? 12345 : 4242, !unaddressed) != 0) return 1;
    printf("pid %d ready\n", (int)getpid());
    if (strcmp(mode, "raise") == 0) {
        raise(SIGTERM);
    } else if (strcmp(mode, "raise-thread") == 0) {
        pthread_t thread;
        if (pthread_create(&thread, NULL, raiser, NULL) != 0) return 1;
        pthread_join(thread, NULL);
    } else if (strcmp(mode, "wait") == 0) {
        for (;;) pause();
    } else if (strcmp(mode, "exec") == 0) {
        return exec_true(argc > 2 ? argv[2] : "execv");
    } else if (strcmp(mode, "spawn") == 0) {
        if (spawn_plain(argv[0], argc > 2 ? argv[2] : "posix_spawn") != 0) return 1;
    } else if (strcmp(mode, "exec-missing") == 0) {
        char *args[] = {"missing", NULL};
        if (execv("/nonexistent/aclalloc-missing", args) != -1) return 1;
    } else if (strcmp(mode, "fork-exec") == 0) {
        pid_t child = fork();
        if (child == 0) _exit(exec_true("execv"));
        int status = 0;
        if (child < 0 || waitpid(child, &status, 0) != child || status != 0) return 1;
    } else if (strcmp(mode, "chdir") == 0) {
        if (chdir("/") != 0) return 1;
    } else if (strcmp(mode, "default") == 0) {
        aclrtStream stream = NULL;
        void *p = NULL;
        aclError rc = aclInit(NULL);
        if (rc == ACL_SUCCESS) rc = aclrtSetDevice(0);
        if (rc == ACL_SUCCESS) rc = aclrtCreateStream(&stream);
        if (rc == ACL_SUCCESS) rc = aclallocDefaultMalloc(&p, 1 << 20, stream);
        if (rc == ACL_SUCCESS) rc = aclallocDefaultFree(p);
        if (rc == ACL_SUCCESS) rc = aclallocLaunchKernel(stream, 1 << 20, nothing, NULL);
        if (rc == ACL_SUCCESS) rc = aclrtSynchronizeStream(stream);
        printf("default pool: %d\n", rc);
        return rc == ACL_SUCCESS ? 0 : 1;
    }
    printf("went on after %s\n", mode);
    return 0;
}
