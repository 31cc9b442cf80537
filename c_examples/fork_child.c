/*
 * fork() in a process that uses streams (multiprocessing, pre-forking
 * servers, test runners): in the child, every stream inherited from the
 * parent is refused with an error that says it was created before fork()
 * (no hang: an alarm bounds the run; no panic text), and everything the
 * child creates itself works, memory included. The parent is untouched.
 */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "acl/acl.h"
#include "aclalloc.h"
#include "common/check.h"
#include "common/expect.h"
#include "common/hang_guard.h"


static void expect_inherited(const char *what, aclError rc) {
    const char *m = aclGetRecentErrMsg();
    printf("child: %-28s -> %d %s\n", what, rc, m ? m : "(no message)");
    EXPECT(rc == ACL_ERROR_INVALID_PARAM);
    EXPECT(m != NULL && strstr(m, "before fork()") != NULL);
}

static int child(aclrtStream inherited, void *inherited_ptr) {
    hang_guard("fork_child: the child hung\n", 20);
    /* Inherited streams: refused, never waited for. */
    expect_inherited("aclallocLaunchKernel", aclallocLaunchKernel(inherited, 4096, count_kernel, NULL));
    expect_inherited("aclrtSynchronizeStream", aclrtSynchronizeStream(inherited));
    expect_inherited("aclrtMemsetAsync", aclrtMemsetAsync(inherited_ptr, 64, 0, 64, inherited));
    expect_inherited("aclrtDestroyStream", aclrtDestroyStream(inherited));
    /* What waits for every stream skips the ones whose workers are gone. */
    CHECK(aclrtSynchronizeDevice());
    CHECK(aclrtFree(inherited_ptr));
    /* The context's default stream (NULL) is the child's own: made anew. */
    CHECK(aclallocLaunchKernel(NULL, 4096, count_kernel, NULL));
    CHECK(aclrtSynchronizeStream(NULL));
    EXPECT(ran == 1);

    /* The child's own streams work. */
    aclrtStream mine;
    CHECK(aclrtCreateStream(&mine));
    void *p = NULL;
    CHECK(aclrtMalloc(&p, 1 << 20, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMemsetAsync(p, 1 << 20, 7, 1 << 20, mine));
    for (int i = 0; i < 100; i++) {
        CHECK(aclallocLaunchKernel(mine, 4096, count_kernel, NULL));
    }
    CHECK(aclrtSynchronizeStream(mine));
    EXPECT(ran == 101);
    unsigned char host = 0;
    CHECK(aclrtMemcpy(&host, 1, p, 1, ACL_MEMCPY_DEVICE_TO_HOST));
    EXPECT(host == 7);
    CHECK(aclrtFree(p));
    CHECK(aclrtDestroyStream(mine));
    /* Tearing down inherited state neither hangs nor panics. */
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    /* And the runtime starts again in the child. */
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    CHECK(aclallocLaunchKernel(NULL, 0, count_kernel, NULL));
    CHECK(aclrtSynchronizeDevice());
    EXPECT(ran == 102);
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    return failures ? 1 : 0;
}

int main(void) {
    setenv("ACLALLOC_DEVICE_MEMORY", "256MiB", 1);
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtStream stream;
    CHECK(aclrtCreateStream(&stream));
    void *p = NULL;
    CHECK(aclrtMalloc(&p, 4096, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclallocLaunchKernel(stream, 4096, count_kernel, NULL));
    CHECK(aclallocLaunchKernel(NULL, 4096, count_kernel, NULL));
    CHECK(aclrtSynchronizeDevice());
    EXPECT(ran == 2);
    fflush(stdout);

    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 1;
    }
    if (pid == 0) {
        ran = 0;
        int rc = child(stream, p);
        fflush(stdout);
        /* Memory the parent's worker threads own (their stacks, join
         * handles, thread-local destructor records) is unreachable in the
         * child, where those threads do not exist: a leak checker at the
         * child's exit reports it. Ending with exec, as a pre-forked worker
         * eventually does, leaves it out; the result is the exit status. */
        execl("/bin/sh", "sh", "-c", rc == 0 ? "exit 0" : "exit 1", (char *)NULL);
        _exit(rc);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) {
        perror("waitpid");
        return 1;
    }
    printf("child: %s %d\n", WIFEXITED(status) ? "exited" : "killed by signal",
           WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0);

    /* The parent's streams are its own still. */
    CHECK(aclallocLaunchKernel(stream, 4096, count_kernel, NULL));
    CHECK(aclrtSynchronizeStream(stream));
    EXPECT(ran == 3);
    CHECK(aclrtFree(p));
    CHECK(aclrtDestroyStream(stream));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("%s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
