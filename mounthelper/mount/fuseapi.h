/* SPDX-License-Identifier: MIT */
/* The libfuse API the mount is written against (3.14's, as in Debian 12), and the limits
 * it sets on it; every file that calls libfuse includes it through here. */
#ifndef STP_FUSEAPI_H
#define STP_FUSEAPI_H

#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION 314
#endif
#include <fuse_lowlevel.h>

/* The largest read the kernel may send: libfuse's 256-page limit. The mount passes it as
 * max_read= and the init handler sets it in conn->max_read: they must agree, or INIT
 * fails. */
#define STP_MAX_READ (1u << 20)

#endif
