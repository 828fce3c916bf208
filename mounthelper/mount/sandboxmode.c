/* SPDX-License-Identifier: MIT */
/* The sandbox's modes by name (sandbox.h): apart from sandbox.c, so that the option
 * parser, which `stipple mount` links, pulls in no libseccomp or libcap. */
#include "sandbox.h"

#include <errno.h>
#include <string.h>

int stp_sandbox_parse_mode(const char *s, enum stp_sandbox_mode *mode)
{
	if (!strcmp(s, "on"))
		*mode = STP_SANDBOX_ON;
	else if (!strcmp(s, "log"))
		*mode = STP_SANDBOX_LOG;
	else if (!strcmp(s, "off"))
		*mode = STP_SANDBOX_OFF;
	else
		return -EINVAL;
	return 0;
}
