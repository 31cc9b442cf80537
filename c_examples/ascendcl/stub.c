/*
 * A stand-in for CANN's libascendcl.so at link time only: it gives the
 * program a DT_NEEDED entry for libascendcl.so, as linking against CANN
 * would. Every function aborts, so the program only passes if the loader
 * found aclalloc under that name at run time.
 */
#include <stdlib.h>

#define STUB(name)      \
    void name(void);    \
    void name(void) { abort(); }

STUB(aclInit)
STUB(aclFinalize)
STUB(aclrtSetDevice)
STUB(aclrtResetDevice)
STUB(aclrtGetDeviceCount)
STUB(aclrtCreateStream)
STUB(aclrtDestroyStream)
STUB(aclrtSynchronizeStream)
STUB(aclrtMalloc)
STUB(aclrtFree)
STUB(aclrtMemcpy)
STUB(aclrtMemcpyAsync)
STUB(aclrtAllocatorCreateDesc)
STUB(aclrtAllocatorDestroyDesc)
STUB(aclrtAllocatorSetObjToDesc)
STUB(aclrtAllocatorSetAllocFuncToDesc)
STUB(aclrtAllocatorSetFreeFuncToDesc)
STUB(aclrtAllocatorSetGetAddrFromBlockFuncToDesc)
STUB(aclrtAllocatorRegister)
STUB(aclrtAllocatorGetByStream)
STUB(aclrtAllocatorUnregister)
STUB(aclGetRecentErrMsg)
