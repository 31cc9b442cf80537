/*
 * How the examples check calls, shared so that each example shows only the
 * ACL calls it is about.
 *
 *   CHECK(call)   for setup and teardown: an ACL call that must succeed, or
 *                 the function (main) returns 1 after printing the call, its
 *                 code and aclGetRecentErrMsg.
 */
#ifndef ACLALLOC_EXAMPLES_CHECK_H
#define ACLALLOC_EXAMPLES_CHECK_H

#include <stdio.h>

#include "acl/acl.h"

#define CHECK(call)                                                      \
    do {                                                                 \
        aclError rc_ = (call);                                           \
        if (rc_ != ACL_SUCCESS) {                                        \
            const char *m_ = aclGetRecentErrMsg();                       \
            fprintf(stderr, "%s: %d %s\n", #call, rc_, m_ ? m_ : "");    \
            return 1;                                                    \
        }                                                                \
    } while (0)

#endif
