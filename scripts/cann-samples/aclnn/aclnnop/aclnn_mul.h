/* Host stand-in of CANN's aclnnMul: out = self * other, elementwise. */
#ifndef ACLALLOC_STANDIN_ACLNN_MUL_H
#define ACLALLOC_STANDIN_ACLNN_MUL_H

#include "aclnn/aclnn_base.h"
#include "acl/acl_rt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* As aclnnAddGetWorkspaceSize. */
aclnnStatus aclnnMulGetWorkspaceSize(const aclTensor *self, const aclTensor *other, aclTensor *out,
                                     uint64_t *workspaceSize, aclOpExecutor **executor);
/* Queues the operator on stream, as a host kernel. */
aclnnStatus aclnnMul(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif
