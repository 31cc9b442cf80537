/*
 * Every kind of bad input, its error code, and the message
 * aclGetRecentErrMsg leaves for it.
 */
#include <stdio.h>
#include <string.h>

#include "acl/acl.h"
#define EXPECT_WHAT_WIDTH 52
#include "common/expect.h"

static void *a(aclrtAllocator o, size_t s) { (void)o; (void)s; return NULL; }
static void f(aclrtAllocator o, aclrtAllocatorBlock b) { (void)o; (void)b; }
static void *g(aclrtAllocatorBlock b) { return b; }

int main(void) {
    static int stream, obj, not_a_desc;
    aclrtAllocatorDesc out = NULL;

    expect("DestroyDesc(NULL)", aclrtAllocatorDestroyDesc(NULL), ACL_ERROR_INVALID_PARAM,
           "aclrtAllocatorDestroyDesc failed because allocatorDesc cannot be a NULL pointer.");
    expect("DestroyDesc(pointer that is no descriptor)", aclrtAllocatorDestroyDesc(&not_a_desc),
           ACL_ERROR_INVALID_PARAM, "Parameter allocatorDesc is invalid");
    expect("SetObjToDesc(NULL, obj)", aclrtAllocatorSetObjToDesc(NULL, &obj), ACL_ERROR_INVALID_PARAM,
           "allocatorDesc cannot be a NULL pointer");

    aclrtAllocatorDesc d = aclrtAllocatorCreateDesc();
    expect("SetObjToDesc(desc, NULL)", aclrtAllocatorSetObjToDesc(d, NULL), ACL_ERROR_INVALID_PARAM,
           "aclrtAllocatorSetObjToDesc failed because allocator cannot be a NULL pointer.");
    expect("SetAllocFuncToDesc(desc, NULL)", aclrtAllocatorSetAllocFuncToDesc(d, NULL), ACL_ERROR_INVALID_PARAM,
           "func cannot be a NULL pointer");
    expect("SetFreeFuncToDesc(desc, NULL)", aclrtAllocatorSetFreeFuncToDesc(d, NULL), ACL_ERROR_INVALID_PARAM,
           "func cannot be a NULL pointer");
    expect("SetAllocAdviseFuncToDesc(desc, NULL)", aclrtAllocatorSetAllocAdviseFuncToDesc(d, NULL),
           ACL_ERROR_INVALID_PARAM, "func cannot be a NULL pointer");
    expect("SetGetAddrFromBlockFuncToDesc(desc, NULL)", aclrtAllocatorSetGetAddrFromBlockFuncToDesc(d, NULL),
           ACL_ERROR_INVALID_PARAM, "func cannot be a NULL pointer");

    expect("Register(NULL, desc)", aclrtAllocatorRegister(NULL, d), ACL_ERROR_INVALID_PARAM,
           "aclrtAllocatorRegister failed because stream cannot be a NULL pointer.");
    expect("Register(stream, NULL)", aclrtAllocatorRegister(&stream, NULL), ACL_ERROR_INVALID_PARAM,
           "allocatorDesc cannot be a NULL pointer");
    expect("Register(stream, empty desc)", aclrtAllocatorRegister(&stream, d), ACL_ERROR_INVALID_PARAM,
           "allocatorDesc->obj cannot be a NULL pointer");
    aclrtAllocatorSetObjToDesc(d, &obj);
    expect("Register(stream, desc without allocFunc)", aclrtAllocatorRegister(&stream, d), ACL_ERROR_INVALID_PARAM,
           "aclrtAllocatorRegister failed because allocatorDesc->allocFunc cannot be a NULL pointer.");
    aclrtAllocatorSetAllocFuncToDesc(d, a);
    expect("Register(stream, desc without freeFunc)", aclrtAllocatorRegister(&stream, d), ACL_ERROR_INVALID_PARAM,
           "allocatorDesc->freeFunc cannot be a NULL pointer");
    aclrtAllocatorSetFreeFuncToDesc(d, f);
    expect("Register(stream, desc without getAddrFromBlockFunc)", aclrtAllocatorRegister(&stream, d),
           ACL_ERROR_INVALID_PARAM, "allocatorDesc->getAddrFromBlockFunc cannot be a NULL pointer");

    expect("GetByStream(unregistered stream)",
           aclrtAllocatorGetByStream(&stream, &out, NULL, NULL, NULL, NULL, NULL), ACL_ERROR_INVALID_PARAM,
           "aclrtAllocatorGetByStream failed. Parameter stream is invalid. Reason: The stream is not "
           "registered with any allocator.");
    aclrtAllocatorSetGetAddrFromBlockFuncToDesc(d, g);
    expect("Register(stream, complete desc)", aclrtAllocatorRegister(&stream, d), ACL_SUCCESS, "");
    expect("GetByStream(stream, NULL out)", aclrtAllocatorGetByStream(&stream, NULL, NULL, NULL, NULL, NULL, NULL),
           ACL_ERROR_INVALID_PARAM, "allocatorDesc cannot be a NULL pointer");
    expect("GetByStream(NULL, out)", aclrtAllocatorGetByStream(NULL, &out, NULL, NULL, NULL, NULL, NULL),
           ACL_ERROR_INVALID_PARAM, "stream cannot be a NULL pointer");
    expect("Unregister(NULL)", aclrtAllocatorUnregister(NULL), ACL_ERROR_INVALID_PARAM,
           "aclrtAllocatorUnregister failed because stream cannot be a NULL pointer.");

    aclrtAllocatorDestroyDesc(d);
    expect("SetAllocFuncToDesc(destroyed desc)", aclrtAllocatorSetAllocFuncToDesc(d, a), ACL_ERROR_INVALID_PARAM,
           "It is not a live allocator descriptor");
    expect("DestroyDesc(destroyed desc)", aclrtAllocatorDestroyDesc(d), ACL_ERROR_INVALID_PARAM,
           "It is not a live allocator descriptor");
    expect("Register(stream, destroyed desc)", aclrtAllocatorRegister(&stream, d), ACL_ERROR_INVALID_PARAM,
           "Parameter allocatorDesc is invalid");

    /* Two failures before one read: both, newest first. */
    (void)aclrtAllocatorUnregister(NULL);
    (void)aclrtAllocatorDestroyDesc(NULL);
    const char *both = aclGetRecentErrMsg();
    const char *first = both ? strstr(both, "aclrtAllocatorDestroyDesc") : NULL;
    const char *second = both ? strstr(both, "aclrtAllocatorUnregister") : NULL;
    if (!(first && second && first < second)) {
        fprintf(stderr, "FAILED: two messages newest first, got: %s\n", both ? both : "(null)");
        failures++;
    }
    aclrtAllocatorUnregister(&stream);
    printf("%s\n", failures ? "error handling: FAILED" : "error handling: every case as documented");
    return failures ? 1 : 0;
}
