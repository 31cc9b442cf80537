/*
 * How the examples that go on after a failed check count failures: the
 * program runs every check, prints what it saw, and fails at the end
 * (main returns failures == 0 ? 0 : 1).
 *
 *   EXPECT(cond)                       cond must hold; a failure prints
 *                                      aclGetRecentErrMsg too.
 *   expect(what, got, want, needle)    an ACL call returned `want`, and left
 *                                      a message containing `needle` (or no
 *                                      message when `want` is ACL_SUCCESS);
 *                                      prints the call, code and message.
 *
 * EXPECT_WHAT_WIDTH, defined before the include, is the column width of
 * `what` in expect()'s lines.
 */
#ifndef ACLALLOC_EXAMPLES_EXPECT_H
#define ACLALLOC_EXAMPLES_EXPECT_H

#include <stdio.h>
#include <string.h>

#include "acl/acl.h"

#ifndef EXPECT_WHAT_WIDTH
#define EXPECT_WHAT_WIDTH 48
#endif

static int failures;

#define EXPECT(cond)                                                                            \
    do {                                                                                        \
        if (!(cond)) {                                                                          \
            const char *m_ = aclGetRecentErrMsg();                                              \
            fprintf(stderr, "%s:%d: check failed: %s (%s)\n", __FILE__, __LINE__, #cond,        \
                    m_ ? m_ : "no message");                                                    \
            failures++;                                                                         \
        }                                                                                       \
    } while (0)

static inline void expect(const char *what, aclError got, aclError want, const char *needle) {
    const char *msg = aclGetRecentErrMsg();
    int ok = got == want && (want == ACL_SUCCESS ? msg == NULL : (msg != NULL && strstr(msg, needle) != NULL));
    printf("%-*s -> %6d  %s\n", EXPECT_WHAT_WIDTH, what, got, msg ? msg : "(no message)");
    if (!ok) {
        fprintf(stderr, "  FAILED: wanted %d and a message containing \"%s\"\n", want, needle);
        failures++;
    }
}

#endif
