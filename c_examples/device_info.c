/*
 * Device, version and error queries on the host runtime, and acl_base.h's
 * data types: run mode, SoC name, package versions, the thread's last error,
 * the context's default stream, peer access, element sizes and float16.
 * Runs with 2 devices.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "acl/acl.h"
#include "aclalloc.h"
#include "common/check.h"
#include "common/expect.h"

int main(void) {
    setenv("ACLALLOC_DEVICE_COUNT", "2", 1);
    CHECK(aclInit(NULL));
    aclrtRunMode mode = ACL_DEVICE;
    CHECK(aclrtGetRunMode(&mode));
    EXPECT(mode == ACL_HOST);
    const char *soc = aclrtGetSocName();
    EXPECT(soc != NULL && strlen(soc) > 0);
    char version[ACL_PKG_VERSION_MAX_SIZE] = {0};
    int32_t number = 0;
    char pkg[] = "runtime";
    CHECK(aclsysGetVersionStr(pkg, version));
    CHECK(aclsysGetVersionNum(pkg, &number));
    /* The CANN whose headers the library implements, by CANN's numbering. */
    EXPECT(strcmp(version, "9.0.0") == 0 && number == 90000000);
    printf("soc %s, runtime %s (%d)\n", soc, version, (int)number);
    /* aclalloc's own version: the loaded library's is the header's. */
    int32_t major = -1, minor = -1, patch = -1;
    CHECK(aclallocGetVersion(&major, &minor, &patch));
    EXPECT(major == ACLALLOC_VERSION_MAJOR && minor == ACLALLOC_VERSION_MINOR &&
           patch == ACLALLOC_VERSION_PATCH);
    expect("aclallocGetVersion(NULL)", aclallocGetVersion(&major, NULL, &patch),
           ACL_ERROR_INVALID_PARAM, "minor");
    EXPECT(aclrtGetLastError(ACL_RT_THREAD_LEVEL) == ACL_ERROR_INVALID_PARAM);

    /* The last error: sticky until taken, per thread. */
    EXPECT(aclrtGetLastError(ACL_RT_THREAD_LEVEL) == ACL_SUCCESS);
    expect("aclrtSetDevice(99)", aclrtSetDevice(99), ACL_ERROR_RT_INVALID_DEVICEID, "deviceId");
    CHECK(aclrtSetDevice(0));
    EXPECT(aclrtPeekAtLastError(ACL_RT_THREAD_LEVEL) == ACL_ERROR_RT_INVALID_DEVICEID);
    EXPECT(aclrtGetLastError(ACL_RT_THREAD_LEVEL) == ACL_ERROR_RT_INVALID_DEVICEID);
    EXPECT(aclrtGetLastError(ACL_RT_THREAD_LEVEL) == ACL_SUCCESS);

    /* The current context's default stream is the one NULL stands for. */
    aclrtStream def = NULL;
    CHECK(aclrtCtxGetCurrentDefaultStream(&def));
    EXPECT(def != NULL);
    aclrtStream again = NULL;
    CHECK(aclrtCtxGetCurrentDefaultStream(&again));
    EXPECT(def == again);
    CHECK(aclrtSynchronizeStream(def));

    uint32_t cores = 0;
    CHECK(aclrtGetResInCurrentThread(ACL_RT_DEV_RES_CUBE_CORE, &cores));
    EXPECT(cores >= 1);
    CHECK(aclrtGetResInCurrentThread(ACL_RT_DEV_RES_VECTOR_CORE, &cores));
    EXPECT(cores >= 1);
    expect("aclrtGetResInCurrentThread(type 7)", aclrtGetResInCurrentThread(7, &cores),
           ACL_ERROR_INVALID_PARAM, "aclrtDevResLimitType");

    int64_t attr = 0;
    CHECK(aclrtGetDeviceInfo(1, ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE, &attr));
    EXPECT(attr == 4LL << 30); /* ACLALLOC_DEVICE_MEMORY's default */
    CHECK(aclrtGetDeviceInfo(1, ACL_DEV_ATTR_PHY_CHIP_ID, &attr));
    EXPECT(attr == 1);
    CHECK(aclrtGetDeviceInfo(0, ACL_DEV_ATTR_AICORE_CORE_NUM, &attr));
    EXPECT(attr >= 1);
    expect("aclrtGetDeviceInfo(L2 cache size)",
           aclrtGetDeviceInfo(0, ACL_DEV_ATTR_L2_CACHE_SIZE, &attr), ACL_ERROR_API_NOT_SUPPORT,
           "device attribute");
    expect("aclrtGetDeviceInfo(device 2)",
           aclrtGetDeviceInfo(2, ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE, &attr),
           ACL_ERROR_RT_INVALID_DEVICEID, "deviceId");

    aclrtErrorInfo info;
    memset(&info, 0xFF, sizeof info);
    CHECK(aclrtGetErrorVerbose(0, &info));
    EXPECT(info.errorType == ACL_RT_NO_ERROR && info.tryRepair == 0 && info.hasDetail == 0);
    expect("aclrtGetErrorVerbose(device 9)", aclrtGetErrorVerbose(9, &info),
           ACL_ERROR_RT_INVALID_DEVICEID, "deviceId");

    int32_t can = -1;
    CHECK(aclrtDeviceCanAccessPeer(&can, 0, 1));
    EXPECT(can == 1);
    CHECK(aclrtDeviceCanAccessPeer(&can, 0, 0));
    EXPECT(can == 0);
    expect("aclrtDeviceCanAccessPeer(device 5)", aclrtDeviceCanAccessPeer(&can, 0, 5),
           ACL_ERROR_RT_INVALID_DEVICEID, "deviceId");
    expect("aclrtDeviceEnablePeerAccess(1)", aclrtDeviceEnablePeerAccess(1, 0), ACL_SUCCESS, NULL);
    expect("aclrtDeviceEnablePeerAccess(flags 1)", aclrtDeviceEnablePeerAccess(1, 1),
           ACL_ERROR_INVALID_PARAM, "flags");
    expect("aclrtDeviceEnablePeerAccess(itself)", aclrtDeviceEnablePeerAccess(0, 0),
           ACL_ERROR_INVALID_PARAM, "current device");
    expect("aclrtDeviceDisablePeerAccess(1)", aclrtDeviceDisablePeerAccess(1), ACL_SUCCESS, NULL);
    expect("aclsysGetVersionStr(NULL)", aclsysGetVersionStr(NULL, version), ACL_ERROR_INVALID_PARAM,
           "pkgName");
    expect("aclrtGetRunMode(NULL)", aclrtGetRunMode(NULL), ACL_ERROR_INVALID_PARAM, "runMode");

    EXPECT(aclDataTypeSize(ACL_FLOAT) == 4 && aclDataTypeSize(ACL_FLOAT16) == 2);
    EXPECT(aclDataTypeSize(ACL_INT64) == 8 && aclDataTypeSize(ACL_COMPLEX128) == 16);
    EXPECT(aclDataTypeSize(ACL_DT_UNDEFINED) == 0);
    aclFloat16 h = aclFloatToFloat16(1.625f);
    EXPECT(h == 0x3E80 && aclFloat16ToFloat(h) == 1.625f);
    EXPECT(aclFloatToFloat16(1e6f) == 0x7C00); /* overflow: infinity */

    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("%s\n", failures == 0 ? "device info: ok" : "device info: FAILED");
    return failures == 0 ? 0 : 1;
}
