/* proc/children: listing this process's children from the kernel's
 * children files and from the /proc walk, orphans a subreaper adopts, the
 * "any child left" answer, and /proc/PID/stat lines with odd names. */
#include "unit.h"

#include <errno.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "proc/children.h"

static int listed(const struct pid_list *l, pid_t pid)
{
    for (size_t k = 0; k < l->n; k++)
        if (l->pids[k] == pid)
            return 1;
    return 0;
}

/* A child that waits to be killed (and dies with us if we fail first). */
static pid_t sleeper(const char *name)
{
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (name)
            prctl(PR_SET_NAME, name);
        for (;;)
            pause();
    }
    return pid;
}

static void end(pid_t pid)
{
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

static void settle(void)
{
    struct timespec ts = {0, 50 * 1000 * 1000};
    nanosleep(&ts, NULL);
}

TEST(no_children_at_first)
{
    struct pid_list l = {0};
    CHECK_EQ_INT(children_list(&l), 0);
    CHECK_EQ_INT((int)l.n, 0);
    CHECK_EQ_INT(children_list_walk(&l), 0);
    CHECK_EQ_INT((int)l.n, 0);
    CHECK(!children_any());
    pid_list_free(&l);
}

TEST(both_ways_list_the_children)
{
    pid_t a = sleeper(NULL), b = sleeper(NULL);
    struct pid_list l = {0};
    CHECK_EQ_INT(children_list(&l), 0);
    CHECK_EQ_INT((int)l.n, 2);
    CHECK(listed(&l, a) && listed(&l, b));
    CHECK_EQ_INT(children_list_walk(&l), 0);
    CHECK_EQ_INT((int)l.n, 2);
    CHECK(listed(&l, a) && listed(&l, b));
    CHECK(children_any());
    end(a);
    end(b);
    CHECK(!children_any());
    CHECK_EQ_INT(children_list(&l), 0);
    CHECK_EQ_INT((int)l.n, 0);
    pid_list_free(&l);
}

TEST(a_zombie_is_still_a_child)
{
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    siginfo_t info;
    waitid(P_PID, (id_t)pid, &info, WEXITED | WNOWAIT); /* exited, not reaped */
    CHECK(children_any());
    struct proc_brief b;
    CHECK_EQ_INT(proc_brief(pid, &b), 0);
    CHECK_EQ_INT(b.state, 'Z');
    waitpid(pid, NULL, 0);
    CHECK(!children_any());
    CHECK_EQ_INT(proc_brief(pid, &b), -1);
}

TEST(a_subreaper_lists_the_orphans_it_adopts)
{
    CHECK_EQ_INT(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
    int pfd[2];
    CHECK_EQ_INT(pipe(pfd), 0);
    pid_t middle = fork();
    if (middle == 0) {
        pid_t orphan = sleeper(NULL);
        ssize_t w = write(pfd[1], &orphan, sizeof orphan);
        _exit(w == sizeof orphan ? 0 : 1);
    }
    pid_t orphan = 0;
    CHECK_EQ_INT((int)read(pfd[0], &orphan, sizeof orphan), (int)sizeof orphan);
    waitpid(middle, NULL, 0); /* the middle one has exited: the orphan is ours */
    struct pid_list l = {0};
    CHECK_EQ_INT(children_list(&l), 0);
    CHECK(l.n == 1 && listed(&l, orphan));
    CHECK_EQ_INT(children_list_walk(&l), 0);
    CHECK(l.n == 1 && listed(&l, orphan));
    end(orphan);
    CHECK(!children_any());
    pid_list_free(&l);
    close(pfd[0]);
    close(pfd[1]);
    prctl(PR_SET_CHILD_SUBREAPER, 0);
}

TEST(stat_lines_with_parentheses_in_the_name)
{
    pid_t pid = sleeper("a) b (c) Z 1");
    struct proc_brief b;
    /* the child renames itself once it runs: on a loaded machine that
     * took more than settle()'s 50 ms (seen once in make unit) */
    for (int i = 0; i < 200; i++) {
        if (proc_brief(pid, &b) == 0 && !strcmp(b.name, "a) b (c) Z 1"))
            break;
        settle();
    }
    CHECK_EQ_INT(proc_brief(pid, &b), 0);
    CHECK_STR(b.name, strlen(b.name), "a) b (c) Z 1");
    CHECK(b.state == 'S' || b.state == 'R');
    CHECK_EQ_INT(b.pgid, getpgrp());
    struct pid_list l = {0};
    CHECK_EQ_INT(children_list_walk(&l), 0);
    CHECK(l.n == 1 && listed(&l, pid));
    end(pid);
    pid_list_free(&l);
}

TEST(brief_of_self)
{
    struct proc_brief b;
    CHECK_EQ_INT(proc_brief(getpid(), &b), 0);
    CHECK_EQ_INT(b.state, 'R');
    CHECK_EQ_INT(b.pgid, getpgrp());
    char want[16]; /* the kernel keeps 15 bytes of the name */
    snprintf(want, sizeof want, "%s", program_invocation_short_name);
    CHECK(!strcmp(b.name, want));
}
