/* Front ends, one per subcommand. Each returns the process exit status:
 * 0 ok, 1 runtime failure, 2 usage error. */
#ifndef HERD_CMD_H
#define HERD_CMD_H

int cmd_serve(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_load(int argc, char **argv);
int cmd_lat(int argc, char **argv);
int cmd_lab(int argc, char **argv);
int cmd_spawn(int argc, char **argv);
int cmd_reload(int argc, char **argv);

#endif
