/* herd reload: HUP to the master a pid file names, then its answer
 * (proc/reload_answer.h): exit 0 when a new generation of workers started,
 * 1 with the reason when the master refused the new settings, did not
 * answer in time or is not running. */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmd/cmd.h"
#include "cmd/flags.h"
#include "proc/config.h"
#include "proc/daemon.h"
#include "proc/reload_answer.h"

static const char reload_usage[] =
    "usage: herd reload (--pid-file FILE | --config FILE) [--timeout DUR]\n"
    "\n"
    "Sends HUP to the herd serve master whose pid FILE holds (or the pid-file of\n"
    "a config FILE) and waits for its answer, which the master writes to\n"
    "FILE.reload: the settings are read again and a new generation of workers\n"
    "starts, or the reload is refused (a bad config: FILE:LINE: reason) and the\n"
    "old workers keep serving. Changes to listen, workers, model, error-log and\n"
    "pid-file need a restart: the answer says so.\n"
    "\n"
    "  --pid-file FILE   the master's pid file (as given to herd serve)\n"
    "  --config FILE     take the pid file from this config file's pid-file line\n"
    "  --timeout DUR     how long to wait for the answer (default 10s)\n"
    "  -h, --help        this text\n"
    "\n"
    "Exit status: 0 reloaded (warnings, if any, on stdout too); 1 refused, no\n"
    "master running, or no answer in time (the reason on stderr); 2 bad usage.\n";

enum opt { O_PID_FILE, O_CONFIG, O_TIMEOUT, O_HELP };

static const struct flag_opt opts[] = {
    {"--pid-file", O_PID_FILE, 1},
    {"--config", O_CONFIG, 1},
    {"--timeout", O_TIMEOUT, 1},
    {"-h", O_HELP, 0},          {"--help", O_HELP, 0},
};

static long read_pid(const char *path, char *err, size_t errlen)
{
    pid_t pid = pidfile_read(path, err, errlen);
    size_t used = strlen(err);
    if (pid < 0 && access(path, F_OK) < 0)
        snprintf(err + used, errlen - used, " (is herd serve running?)");
    return pid;
}

/* The pid file named by a config file (its relative path resolved). */
static int pid_file_of(const char *config, char *out, size_t n)
{
    static struct serve_config cfg;
    char err[1200];
    config_defaults(&cfg);
    if (config_load(&cfg, config, err, sizeof err) < 0) {
        /* the master would refuse it too: no need to ask */
        fprintf(stderr, "herd reload: %s (nothing reloaded)\n", err);
        return 1;
    }
    if (!cfg.pid_file[0]) {
        fprintf(stderr, "herd reload: %s has no pid-file line (or use --pid-file)\n", config);
        return 2;
    }
    snprintf(out, n, "%s", cfg.pid_file);
    return 0;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Whether pid runs herd serve: its command line's second word is "serve"
 * (the binary may have any name, and an upgrade may exec another). A pid
 * file outlives its master (a crash, a reboot), and its pid may be another
 * process's by now: HUP kills most processes. 1 yes (or /proc cannot
 * tell), 0 no (what it runs in what), -1 gone. */
static int is_herd_serve(long pid, char *what, size_t n)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/cmdline", pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return errno == ENOENT ? -1 : 1;
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = '\0';
    if (!len)
        return -1; /* a zombie, or gone */
    const char *argv0 = buf;
    size_t first = strlen(argv0) + 1;
    const char *argv1 = first < len ? buf + first : "";
    if (!strcmp(argv1, "serve"))
        return 1;
    snprintf(what, n, "%.100s%s%.60s", argv0, *argv1 ? " " : "", argv1);
    for (char *p = what; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';
    return 0;
}

/* Sends HUP and waits for an answer that started after it. */
static int reload_and_wait(const char *pid_file, int64_t timeout_ms)
{
    char err[1200];
    long pid = read_pid(pid_file, err, sizeof err);
    if (pid < 0) {
        fprintf(stderr, "herd reload: %s\n", err);
        return 1;
    }
    char what[200];
    int herd = is_herd_serve(pid, what, sizeof what);
    if (herd == 0) {
        fprintf(stderr, "herd reload: pid %ld from %s is not herd serve (it runs '%s'): "
                        "not signalled (a stale pid file?)\n", pid, pid_file, what);
        return 1;
    }
    uint64_t sent = reload_answer_clock();
    if (herd < 0 || kill((pid_t)pid, SIGHUP) < 0) {
        if (herd < 0)
            errno = ESRCH;
        fprintf(stderr, "herd reload: cannot signal pid %ld from %s: %s\n", pid, pid_file,
                strerror(errno));
        return 1;
    }
    struct reload_answer a;
    /* --timeout may be far past what nanoseconds since boot hold */
    uint64_t wait_ns = (uint64_t)timeout_ms > (UINT64_MAX - sent) / 1000000u
                           ? UINT64_MAX - sent : (uint64_t)timeout_ms * 1000000u;
    uint64_t deadline = sent + wait_ns;
    while (!reload_answer_read(pid_file, &a) || a.pid != pid || a.started_ns < sent) {
        if (kill((pid_t)pid, 0) < 0 && errno == ESRCH) {
            fprintf(stderr, "herd reload: master %ld exited without answering\n", pid);
            return 1;
        }
        if (reload_answer_clock() >= deadline) {
            fprintf(stderr, "herd reload: no answer from pid %ld in %s.reload within %lld ms "
                            "(not a herd serve master, or --model single, which does not "
                            "reload)\n", pid, pid_file, (long long)timeout_ms);
            return 1;
        }
        sleep_ms(10);
    }
    fputs(a.text, a.ok ? stdout : stderr);
    return a.ok ? 0 : 1;
}

int cmd_reload(int argc, char **argv)
{
    const char *pid_file = NULL, *config = NULL;
    int64_t timeout_ms = 10000;
    for (int i = 1; i < argc; i++) {
        const char *v;
        int k = flag_match(opts, sizeof opts / sizeof opts[0], argc, argv, &i, &v);
        if (k == FLAG_UNKNOWN)
            return flag_usage_error("reload", "unknown argument '%s'", argv[i]);
        if (k == FLAG_NO_VALUE)
            return flag_usage_error("reload", "%s needs a value", argv[i]);
        switch (opts[k].kind) {
        case O_PID_FILE:
            pid_file = v;
            break;
        case O_CONFIG:
            config = v;
            break;
        case O_TIMEOUT:
            if (flag_duration_ms(v, &timeout_ms) < 0 || timeout_ms <= 0)
                return flag_bad_value("reload", "--timeout", v);
            break;
        case O_HELP:
            fputs(reload_usage, stdout);
            return 0;
        }
    }
    if (!pid_file == !config)
        return flag_usage_error("reload", "%sgive --pid-file FILE or --config FILE",
                                pid_file ? "only one: " : "");
    static char from_config[1024];
    if (config) {
        int rc = pid_file_of(config, from_config, sizeof from_config);
        if (rc)
            return rc;
        pid_file = from_config;
    }
    return reload_and_wait(pid_file, timeout_ms);
}
