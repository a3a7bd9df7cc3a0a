#include "proc/reload_answer.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/regfile.h"

uint64_t reload_answer_clock(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int answer_path(const char *pid_file, const char *suffix, char *out, size_t n)
{
    return (size_t)snprintf(out, n, "%s.reload%s", pid_file, suffix) < n ? 0 : -1;
}

int reload_answer_write(const char *pid_file, const struct reload_answer *a, char *err,
                        size_t errlen)
{
    char path[1100], body[sizeof a->text + 96];
    if (!pid_file || !*pid_file)
        return 0;
    if (answer_path(pid_file, ".tmp", path, sizeof path) < 0 ||
        answer_path(pid_file, "", path, sizeof path) < 0) {
        snprintf(err, errlen, "reload answer for %s: path too long", pid_file);
        return -1;
    }
    int n = snprintf(body, sizeof body, "herd-reload %ld %" PRIu64 " %s\n%s", (long)a->pid,
                     a->started_ns, a->ok ? "ok" : "refused", a->text);
    size_t len = n < 0 ? 0 : (size_t)n < sizeof body ? (size_t)n : sizeof body - 1;
    if (regfile_replace(path, ".tmp", body, len) < 0) {
        snprintf(err, errlen, "reload answer %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

int reload_answer_read(const char *pid_file, struct reload_answer *a)
{
    char path[1100], result[16];
    if (answer_path(pid_file, "", path, sizeof path) < 0)
        return 0;
    FILE *f = regfile_open(path);
    if (!f)
        return 0;
    long pid;
    memset(a, 0, sizeof *a);
    int got = fscanf(f, "herd-reload %ld %" SCNu64 " %15s", &pid, &a->started_ns, result) == 3 &&
              fgetc(f) == '\n';
    if (got) {
        size_t n = fread(a->text, 1, sizeof a->text - 1, f);
        a->text[n] = '\0';
        a->pid = (pid_t)pid;
        a->ok = !strcmp(result, "ok");
    }
    fclose(f);
    return got;
}

void reload_answer_remove(const char *pid_file, pid_t pid)
{
    struct reload_answer a;
    char path[1100];
    if (pid_file && *pid_file && reload_answer_read(pid_file, &a) && a.pid == pid &&
        answer_path(pid_file, "", path, sizeof path) == 0)
        unlink(path);
}
