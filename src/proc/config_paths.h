/* Paths in the settings: where a relative path in a config file points,
 * and whether the paths a server will use are usable before it starts
 * (for --check-config). Return 0, or -1 with a one-line reason in err. */
#ifndef HERD_PROC_CONFIG_PATHS_H
#define HERD_PROC_CONFIG_PATHS_H

#include <stddef.h>

#include "proc/config.h"

/* A relative value of a path setting (docroot, access-log, error-log,
 * pid-file, upgrade-binary, tls-cert, tls-key, and tls-sni's CERT and KEY) read from the config file at conf_path is
 * relative to the file's folder, as nginx's are to its prefix; the flags'
 * are relative to the current directory. Writes the value to use into
 * out: value itself for other settings and absolute paths. */
int config_path_resolve(const char *conf_path, const char *name, const char *value, char *out,
                        size_t outlen, char *err, size_t errlen);

/* The docroot is a directory we can read; the access log, the error log
 * and the pid file can be written (an existing file writable, or a new one
 * creatable in a folder that exists and is writable). */
int config_check_paths(const struct serve_config *cfg, char *err, size_t errlen);

#endif
