/*
 * For the examples that test that nothing hangs (kernels that wait, dead
 * workers, forked children):
 *
 *   hang_guard(text, seconds)   after `seconds`, print `text` on stderr and
 *                               exit with status 3: a hang fails the test
 *                               instead of stalling ctest.
 *   count_kernel                a kernel that counts its runs in `ran`.
 */
#ifndef ACLALLOC_EXAMPLES_HANG_GUARD_H
#define ACLALLOC_EXAMPLES_HANG_GUARD_H

#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

static const char *hang_text;

static void hang_alarm(int sig) {
    (void)sig;
    (void)!write(2, hang_text, strlen(hang_text));
    _exit(3);
}

static inline void hang_guard(const char *text, unsigned seconds) {
    hang_text = text;
    signal(SIGALRM, hang_alarm);
    alarm(seconds);
}

static int ran;

static inline void count_kernel(void *ws, size_t size, void *data) {
    (void)ws;
    (void)size;
    (void)data;
    ran++;
}

#endif
