/* SPDX-License-Identifier: MIT */
/*
 * The subcommands of `stipple`. Each takes the arguments after the subcommand name
 * (argv[0] is the subcommand) and returns the process exit status: 0 on success, 1 on
 * failure (a message already printed), 2 on a usage error.
 */
#ifndef STP_COMMANDS_H
#define STP_COMMANDS_H

int stp_cmd_info(int argc, char **argv);
int stp_cmd_ls(int argc, char **argv);
int stp_cmd_diff(int argc, char **argv);
int stp_cmd_cat(int argc, char **argv);
int stp_cmd_extract(int argc, char **argv);
int stp_cmd_check(int argc, char **argv);
int stp_cmd_mount(int argc, char **argv);
int stp_cmd_status(int argc, char **argv);
int stp_cmd_bench(int argc, char **argv);
int stp_cmd_keygen(int argc, char **argv);
int stp_cmd_sign(int argc, char **argv);
int stp_cmd_verify(int argc, char **argv);
int stp_cmd_publish(int argc, char **argv);

#endif
