/* SPDX-License-Identifier: MIT */
/* The libfuse API the mount is written against (3.14's, as in Debian 12); every file that
 * calls libfuse includes it through here. */
#ifndef STP_FUSEAPI_H
#define STP_FUSEAPI_H

#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION 314
#endif
#include <fuse_lowlevel.h>

#endif
