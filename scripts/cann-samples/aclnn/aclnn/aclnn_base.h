/*
 * Host stand-in of CANN's operator library interface (libnnopbase,
 * libopapi): the tensor, scalar and executor types and the calls that make
 * them, as CANN's operator samples use them. Not part of aclalloc: the
 * prefix (scripts/cann-prefix.sh) installs it beside the runtime's headers.
 */
#ifndef ACLALLOC_STANDIN_ACLNN_BASE_H
#define ACLALLOC_STANDIN_ACLNN_BASE_H

#include <stdint.h>

#include "acl/acl_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What the operator calls return: 0 on success. */
typedef int32_t aclnnStatus;

/* A tensor's memory layout (CANN keeps the full list in acl_base.h; the
 * stand-in knows the plain layouts, and computes only on contiguous ND data). */
typedef enum aclFormat {
    ACL_FORMAT_UNDEFINED = -1,
    ACL_FORMAT_NCHW = 0,
    ACL_FORMAT_NHWC = 1,
    ACL_FORMAT_ND = 2,
} aclFormat;

typedef struct aclTensor aclTensor;
typedef struct aclScalar aclScalar;
typedef struct aclOpExecutor aclOpExecutor;

/* A tensor over device memory at tensorData (offset in elements). */
aclTensor *aclCreateTensor(const int64_t *viewDims, uint64_t viewDimsNum, aclDataType dataType,
                           const int64_t *stride, int64_t offset, aclFormat format,
                           const int64_t *storageDims, uint64_t storageDimsNum, void *tensorData);
/* A scalar holding a copy of *value. */
aclScalar *aclCreateScalar(void *value, aclDataType dataType);
aclnnStatus aclDestroyTensor(const aclTensor *tensor);
aclnnStatus aclDestroyScalar(const aclScalar *scalar);

#ifdef __cplusplus
}
#endif

#endif
