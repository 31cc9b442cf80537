/*
 * CANN include path <acl/acl.h>: code written against CANN's headers builds
 * unchanged with -I include. Everything aclalloc implements is declared in
 * the generated <aclalloc.h>.
 * SPDX-License-Identifier: MIT OR Apache-2.0
 */
#ifndef INC_EXTERNAL_ACL_ACL_H_
#define INC_EXTERNAL_ACL_ACL_H_

#include "../aclalloc.h"

#endif /* INC_EXTERNAL_ACL_ACL_H_ */
