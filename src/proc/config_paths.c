#include "proc/config_paths.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Settings whose whole value is a path (tls-sni holds two: resolve_sni). */
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

static int resolve_one(const char *conf_path, const char *name, const char *value,
                       char *out, size_t outlen, char *err, size_t errlen);

/* tls-sni = NAME=CERT,KEY: CERT and KEY are paths (NAME has no '/'). */
static int resolve_sni(const char *conf_path, const char *value, char *out, size_t outlen,
                       char *err, size_t errlen)
{
    const char *eq = strchr(value, '=');
    const char *comma = eq ? strchr(eq + 1, ',') : NULL;
    if (!comma) {
        snprintf(out, outlen, "%s", value); /* config_set says what is wrong */
        return 0;
    }
    char cert[PATH_MAX], rcert[PATH_MAX + 16], rkey[PATH_MAX + 16];
    snprintf(cert, sizeof cert, "%.*s", (int)(comma - eq - 1), eq + 1);
    if (resolve_one(conf_path, "tls-sni", cert, rcert, sizeof rcert, err, errlen) < 0 ||
        resolve_one(conf_path, "tls-sni", comma + 1, rkey, sizeof rkey, err, errlen) < 0)
        return -1;
    if ((size_t)snprintf(out, outlen, "%.*s=%s,%s", (int)(eq - value), value, rcert, rkey) >=
        outlen) {
        snprintf(err, errlen, "tls-sni: paths too long");
        return -1;
    }
    return 0;
}

int config_path_resolve(const char *conf_path, const char *name, const char *value, char *out,
                        size_t outlen, char *err, size_t errlen)
{
    if (value && !strcmp(name, "tls-sni"))
        return resolve_sni(conf_path, value, out, outlen, err, errlen);
    if (value && !is_path_setting(name)) {
        snprintf(out, outlen, "%s", value);
        return 0;
    }
    return resolve_one(conf_path, name, value, out, outlen, err, errlen);
}

static int resolve_one(const char *conf_path, const char *name, const char *value,
                       char *out, size_t outlen, char *err, size_t errlen)
{
    if (!value || value[0] == '/') {
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
