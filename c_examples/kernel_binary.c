/*
 * Kernel binaries loaded by file name and launched with an argument list,
 * as CANN's kernel samples do: aclrtBinaryLoadFromFile,
 * aclrtBinaryGetFunction, aclrtKernelArgsInit / Append / AppendPlaceHolder /
 * GetPlaceHolderBuffer / Finalize, aclrtLaunchKernelWithConfig and
 * aclrtBinaryUnLoad. On the host runtime the binary is a shared object of
 * host stand-ins (kernel_binary_kernels.c, KERNELS_PATH); each kernel runs
 * on the stream's worker once per block.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "acl/acl.h"
#include "aclalloc.h"
#include "common/check.h"
#include "common/expect.h"

#define N 1000
#define BLOCKS 4

int main(void)
{
    aclrtStream stream = NULL;
    aclrtBinHandle bin = NULL;
    aclrtFuncHandle scale = NULL, blocks = NULL, missing = NULL;
    aclrtArgsHandle args = NULL;
    aclrtParamHandle px = NULL, py = NULL, pn = NULL, pfactor = NULL;
    float *x = NULL, *y = NULL, *factor = NULL;

    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    CHECK(aclrtCreateStream(&stream));
    CHECK(aclrtMalloc((void **)&x, N * sizeof(float), ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc((void **)&y, N * sizeof(float), ACL_MEM_MALLOC_HUGE_FIRST));
    for (int i = 0; i < N; ++i) {
        x[i] = (float)i; /* device memory is host memory on the host runtime */
    }

    CHECK(aclrtBinaryLoadFromFile(KERNELS_PATH, NULL, &bin));
    CHECK(aclrtBinaryGetFunction(bin, "scale", &scale));
    expect("aclrtBinaryGetFunction(bin, \"missing\")", aclrtBinaryGetFunction(bin, "missing", &missing),
           ACL_ERROR_INVALID_PARAM, "aclallocKernel_missing");
    EXPECT(missing == NULL);

    /* scale(x, y, n, factor): three appended values and a placeholder. */
    uint32_t n = N;
    CHECK(aclrtKernelArgsInit(scale, &args));
    CHECK(aclrtKernelArgsAppend(args, &x, sizeof x, &px));
    CHECK(aclrtKernelArgsAppend(args, &y, sizeof y, &py));
    CHECK(aclrtKernelArgsAppend(args, &n, sizeof n, &pn));
    CHECK(aclrtKernelArgsAppendPlaceHolder(args, &pfactor));
    CHECK(aclrtKernelArgsGetPlaceHolderBuffer(args, pfactor, sizeof(float), (void **)&factor));
    *factor = 2.5f;
    expect("aclrtKernelArgsAppend after a placeholder buffer", aclrtKernelArgsAppend(args, &n, sizeof n, &pn),
           ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "after getting placeholder buffer");
    CHECK(aclrtKernelArgsFinalize(args));
    CHECK(aclrtLaunchKernelWithConfig(scale, BLOCKS, stream, NULL, args, NULL));
    /* The launch took a copy: a new factor is for the next launch only. */
    *factor = 100.0f;
    CHECK(aclrtSynchronizeStream(stream));
    int wrong = 0;
    for (int i = 0; i < N; ++i) {
        wrong += y[i] != (float)i * 2.5f;
    }
    EXPECT(wrong == 0);
    printf("scale: y[999] = %.1f over %d blocks\n", (double)y[N - 1], BLOCKS);

    /* Each block runs once, told its index and the block count. */
    uint32_t *seen = NULL;
    aclrtArgsHandle blockArgs = NULL;
    aclrtParamHandle pseen = NULL;
    CHECK(aclrtMalloc((void **)&seen, BLOCKS * sizeof(uint32_t), ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtBinaryGetFunction(bin, "blocks", &blocks));
    /* A thread has one list from aclrtKernelArgsInit at a time, as in CANN:
     * this one retires the list of scale (its launch above kept a copy). */
    CHECK(aclrtKernelArgsInit(blocks, &blockArgs));
    expect("aclrtKernelArgsFinalize(retired list)", aclrtKernelArgsFinalize(args), ACL_ERROR_INVALID_PARAM,
           "argsHandle");
    CHECK(aclrtKernelArgsAppend(blockArgs, &seen, sizeof seen, &pseen));
    CHECK(aclrtKernelArgsFinalize(blockArgs));
    CHECK(aclrtLaunchKernelWithConfig(blocks, BLOCKS, stream, NULL, blockArgs, NULL));
    CHECK(aclrtSynchronizeStream(stream));
    for (uint32_t b = 0; b < BLOCKS; ++b) {
        EXPECT(seen[b] == BLOCKS * 1000 + b + 1);
    }
    expect("aclrtLaunchKernelWithConfig(numBlocks 0)",
           aclrtLaunchKernelWithConfig(blocks, 0, stream, NULL, blockArgs, NULL), ACL_ERROR_INVALID_PARAM,
           "numBlocks");
    expect("aclrtLaunchKernelWithConfig(args of another function)",
           aclrtLaunchKernelWithConfig(scale, 1, stream, NULL, blockArgs, NULL), ACL_ERROR_INVALID_PARAM,
           "another function");

    /* Unloading with a launch still queued: the launch runs, the handles die. */
    atomic_int go = 0;
    int done = 0;
    atomic_int *goPtr = &go;
    int *donePtr = &done;
    aclrtFuncHandle waitFor = NULL;
    aclrtArgsHandle waitArgs = NULL;
    aclrtParamHandle p = NULL;
    CHECK(aclrtBinaryGetFunction(bin, "wait_for", &waitFor));
    CHECK(aclrtKernelArgsInit(waitFor, &waitArgs));
    CHECK(aclrtKernelArgsAppend(waitArgs, &goPtr, sizeof goPtr, &p));
    CHECK(aclrtKernelArgsAppend(waitArgs, &donePtr, sizeof donePtr, &p));
    CHECK(aclrtKernelArgsFinalize(waitArgs));
    CHECK(aclrtLaunchKernelWithConfig(waitFor, 1, stream, NULL, waitArgs, NULL));
    CHECK(aclrtLaunchKernelWithConfig(waitFor, 1, stream, NULL, waitArgs, NULL));
    CHECK(aclrtBinaryUnLoad(bin));
    expect("aclrtLaunchKernelWithConfig after unload", aclrtLaunchKernelWithConfig(waitFor, 1, stream, NULL, waitArgs, NULL),
           ACL_ERROR_INVALID_PARAM, "funcHandle");
    expect("aclrtBinaryUnLoad twice", aclrtBinaryUnLoad(bin), ACL_ERROR_INVALID_PARAM, "binHandle");
    atomic_store(&go, 1);
    CHECK(aclrtSynchronizeStream(stream));
    EXPECT(done == 2);
    printf("unload: %d queued launches ran after aclrtBinaryUnLoad\n", done);

    expect("aclrtBinaryLoadFromFile(no such file)", aclrtBinaryLoadFromFile("no_such_kernels.o", NULL, &bin),
           ACL_ERROR_INVALID_FILE, "no_such_kernels.o");

    CHECK(aclrtFree(seen));
    CHECK(aclrtFree(y));
    CHECK(aclrtFree(x));
    CHECK(aclrtDestroyStream(stream));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    if (failures == 0) {
        printf("kernel_binary: ok\n");
    }
    return failures == 0 ? 0 : 1;
}
