/* SPDX-License-Identifier: MIT */
/*
 * How `stipple status` asks a running mount for its state: a getxattr of STP_STATUS_XATTR
 * on the mount's root (not listed by listxattr), answered with "key=value" lines, one per
 * line. The confined daemon can open no socket or file; this needs neither. The keys are
 * listed in mount/status.h, which writes them; readers/cmd_status.c reads them.
 */
#ifndef STP_MOUNTSTATUS_H
#define STP_MOUNTSTATUS_H

#define STP_STATUS_XATTR "user.stipple.status"
/* The largest status text a mount answers with. */
#define STP_STATUS_MAX 4096

#endif
