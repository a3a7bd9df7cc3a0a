#include "proc/children.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/readfile.h"

static int pid_list_add(struct pid_list *list, pid_t pid)
{
    if (list->n == list->cap) {
        size_t cap = list->cap ? list->cap * 2 : 64;
        pid_t *p = realloc(list->pids, cap * sizeof *p);
        if (!p)
            return -1;
        list->pids = p;
        list->cap = cap;
    }
    list->pids[list->n++] = pid;
    return 0;
}

void pid_list_free(struct pid_list *list)
{
    free(list->pids);
    *list = (struct pid_list){0};
}

/* A name in /proc that is a process id. */
static pid_t pid_of_name(const char *name)
{
    if (!isdigit((unsigned char)name[0]))
        return 0;
    char *end;
    long v = strtol(name, &end, 10);
    return *end || v <= 0 ? 0 : (pid_t)v;
}

/* The parent in a /proc/PID/stat line: the field after the state, which
 * follows the last ')' (the command name may hold spaces and parentheses). */
static pid_t parent_in_stat(const char *stat)
{
    const char *p = strrchr(stat, ')');
    char state;
    long ppid;
    return p && sscanf(p + 1, " %c %ld", &state, &ppid) == 2 ? (pid_t)ppid : -1;
}

int proc_brief(pid_t pid, struct proc_brief *out)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    char *stat = read_file_whole(path, NULL);
    if (!stat)
        return -1;
    const char *open_paren = strchr(stat, '('), *close_paren = strrchr(stat, ')');
    long ppid, pgid;
    int ok = open_paren && close_paren > open_paren &&
             sscanf(close_paren + 1, " %c %ld %ld", &out->state, &ppid, &pgid) == 3;
    if (ok)
        snprintf(out->name, sizeof out->name, "%.*s", (int)(close_paren - open_paren - 1),
                 open_paren + 1);
    out->pgid = ok ? (pid_t)pgid : 0;
    free(stat);
    return ok ? 0 : -1;
}

int children_list_walk(struct pid_list *list)
{
    list->n = 0;
    DIR *d = opendir("/proc");
    if (!d)
        return -1;
    pid_t self = getpid();
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(d))) {
        pid_t pid = pid_of_name(e->d_name);
        if (!pid)
            continue;
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
        char *stat = read_file_whole(path, NULL);
        if (!stat)
            continue; /* gone meanwhile */
        if (parent_in_stat(stat) == self)
            rc = pid_list_add(list, pid);
        free(stat);
    }
    closedir(d);
    return rc;
}

/* Adds the pids listed in one thread's children file. Returns 0, 1 when
 * the kernel has no such file, or -1. */
static int add_thread_children(struct pid_list *list, pid_t tid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/children", (int)tid);
    char *text = read_file_whole(path, NULL);
    if (!text)
        return errno == ENOENT ? 1 : -1;
    int rc = 0;
    for (char *p = text, *end; rc == 0 && *p; p = end) {
        long v = strtol(p, &end, 10);
        if (end == p)
            break;
        if (v > 0)
            rc = pid_list_add(list, (pid_t)v);
    }
    free(text);
    return rc;
}

/* The children files of every thread (a child belongs to the thread that
 * forked it; an orphan to whichever thread the kernel picked). Returns 0,
 * 1 when the kernel has none (CONFIG_PROC_CHILDREN off), or -1. */
static int children_list_files(struct pid_list *list)
{
    list->n = 0;
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return -1;
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(d))) {
        pid_t tid = pid_of_name(e->d_name);
        if (tid)
            rc = add_thread_children(list, tid);
    }
    closedir(d);
    return rc;
}

int children_list(struct pid_list *list)
{
    static int no_children_files;
    if (!no_children_files) {
        int rc = children_list_files(list);
        if (rc <= 0)
            return rc;
        no_children_files = 1;
    }
    return children_list_walk(list);
}

int children_any(void)
{
    siginfo_t info;
    /* WNOWAIT: a zombie stays for whoever reaps it. */
    return waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) == 0 || errno != ECHILD;
}
