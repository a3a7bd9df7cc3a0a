#include "proc/config_paths.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const path_settings[] = {
    "docroot", "access-log", "error-log", "pid-file", "upgrade-binary", "tls-cert", "tls-key",
};

static int is_path_setting(const char *name)
{
    for (size_t i = 0; i < sizeof path_settings / sizeof path_settings[0]; i++)
        if (!strcmp(name, path_settings[i]))
            return 1;
    return 0;
}

int config_path_resolve(const char *conf_path, const char *name, const char *value, char *out,
                        size_t outlen, char *err, size_t errlen)
{
    if (!value || value[0] == '/' || !is_path_setting(name)) {
        snprintf(out, outlen, "%s", value ? value : "");
        return 0;
    }
    /* The folder made absolute, so the path survives a later chdir. */
    char dir[PATH_MAX];
    if (!realpath(conf_path, dir)) {
        snprintf(err, errlen, "%s: %s", conf_path, strerror(errno));
        return -1;
    }
    *strrchr(dir, '/') = '\0'; /* realpath gives "/..." with at least one slash */
    if ((size_t)snprintf(out, outlen, "%s/%s", dir, value) >= outlen) {
        snprintf(err, errlen, "%s: path too long once made relative to %s", name, dir);
        return -1;
    }
    return 0;
}

/* A file we will open for appending (or create): path, or its folder. */
static int check_writable(const char *what, const char *path, char *err, size_t errlen)
{
    struct stat st;
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) {
            snprintf(err, errlen, "%s %s: is a directory", what, path);
            return -1;
        }
        if (access(path, W_OK) < 0) {
            snprintf(err, errlen, "%s %s: %s", what, path, strerror(errno));
            return -1;
        }
        return 0;
    }
    if (errno != ENOENT) {
        snprintf(err, errlen, "%s %s: %s", what, path, strerror(errno));
        return -1;
    }
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        strcpy(dir, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    errno = 0;
    if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode) || access(dir, W_OK | X_OK) < 0) {
        snprintf(err, errlen, "%s %s: folder %s: %s", what, path, dir,
                 errno ? strerror(errno) : "not a directory");
        return -1;
    }
    return 0;
}

int config_check_paths(const struct serve_config *cfg, char *err, size_t errlen)
{
    struct stat st;
    errno = 0;
    if (stat(cfg->docroot, &st) < 0 || !S_ISDIR(st.st_mode) ||
        access(cfg->docroot, R_OK | X_OK) < 0) {
        snprintf(err, errlen, "docroot %s: %s", cfg->docroot,
                 errno ? strerror(errno) : "not a directory");
        return -1;
    }
    if (cfg->access_log[0] && check_writable("access-log", cfg->access_log, err, errlen) < 0)
        return -1;
    if (cfg->error_log[0] && check_writable("error-log", cfg->error_log, err, errlen) < 0)
        return -1;
    if (cfg->pid_file[0] && check_writable("pid-file", cfg->pid_file, err, errlen) < 0)
        return -1;
    return 0;
}
