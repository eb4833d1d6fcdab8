/* hbg command-line tool: one function per subcommand. Public headers only. */
#ifndef HBG_TOOLS_CLI_H
#define HBG_TOOLS_CLI_H

int hbg_cmd_devices(int argc, char **argv);
int hbg_cmd_inspect(int argc, char **argv);
int hbg_cmd_bench(int argc, char **argv);
int hbg_cmd_selfcheck(int argc, char **argv);

#endif
