/* Host stand-in of CANN's aclnnAdd: out = self + other * alpha, elementwise. */
#ifndef ACLALLOC_STANDIN_ACLNN_ADD_H
#define ACLALLOC_STANDIN_ACLNN_ADD_H

#include "aclnn/aclnn_base.h"
#include "acl/acl_rt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The workspace the operator needs (none on the host) and its executor,
 * which stays valid for every later launch (a captured model replays it). */
aclnnStatus aclnnAddGetWorkspaceSize(const aclTensor *self, const aclTensor *other, const aclScalar *alpha,
                                     aclTensor *out, uint64_t *workspaceSize, aclOpExecutor **executor);
/* Queues the operator on stream, as a host kernel. */
aclnnStatus aclnnAdd(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif
