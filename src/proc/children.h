/* The processes whose parent is this one: the ones it forked and, once it
 * is a child subreaper (PR_SET_CHILD_SUBREAPER), the orphaned descendants
 * the kernel re-parented to it. herd spawn lists them to find what its
 * children left behind. */
#ifndef HERD_PROC_CHILDREN_H
#define HERD_PROC_CHILDREN_H

#include <stddef.h>
#include <sys/types.h>

struct pid_list {
    pid_t *pids;
    size_t n, cap;
};

/* Fills list (emptied first; its memory is reused) with this process's
 * children, zombies included, from /proc/self/task/TID/children, or from
 * a walk of /proc where the kernel has no such file. The kernel does not
 * promise a snapshot: a child created or re-parented during the call may
 * be missed, so callers look again later. Returns 0, or -1 (errno set). */
int children_list(struct pid_list *list);

/* The same from the walk of /proc/PID/stat alone (exposed for tests). */
int children_list_walk(struct pid_list *list);

/* Whether this process has any child left, running or zombie: when it has
 * none, it has no descendant at all. Atomic, unlike the lists. */
int children_any(void);

void pid_list_free(struct pid_list *list);

/* What /proc/PID/stat says of a process. */
struct proc_brief {
    char name[32];      /* the command name, cut */
    char state;         /* R, S, D, Z... */
    pid_t pgid;
};

/* Returns 0, or -1 when the process is gone (or the line unreadable). */
int proc_brief(pid_t pid, struct proc_brief *out);

#endif
