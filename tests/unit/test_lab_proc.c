/* herd lab's process samples: two samples of a server's process tree
 * compare only when the second still has every process of the first (a
 * process that exits takes its CPU time with it, and the sum can go
 * down: red-team 4, section 3). */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/lab_proc.h"
#include "unit.h"

/* Too big for a test's stack frame many times over: one pair, reused. */
static struct lproc_usage a, b;

static void sample(struct lproc_usage *u, const struct lproc_id *ids, int n)
{
    memset(u, 0, sizeof *u);
    for (int i = 0; i < n; i++)
        u->procs[i] = ids[i];
    u->nproc = n;
}

TEST(same_tree_lost_nothing)
{
    struct lproc_id tree[] = {{100, 1}, {101, 2}, {102, 3}};
    sample(&a, tree, 3);
    sample(&b, tree, 3);
    struct lproc_id gone = {0, 0};
    CHECK_EQ_INT(lproc_usage_lost(&a, &b, &gone), 0);
}

TEST(a_process_gone_is_named)
{
    struct lproc_id before[] = {{100, 1}, {101, 2}, {102, 3}};
    struct lproc_id after[] = {{100, 1}, {102, 3}, {103, 9}}; /* 101 died, 103 respawned */
    sample(&a, before, 3);
    sample(&b, after, 3);
    struct lproc_id gone = {0, 0};
    CHECK_EQ_INT(lproc_usage_lost(&a, &b, &gone), 1);
    CHECK_EQ_INT(gone.pid, 101);
    CHECK_EQ_U64(gone.start, 2);
}

/* The same pid with another start time is another process: the first one
 * went (and its counts with it), however fast its pid was reused. */
TEST(a_reused_pid_is_another_process)
{
    struct lproc_id before[] = {{100, 1}, {101, 2}};
    struct lproc_id after[] = {{100, 1}, {101, 7}};
    sample(&a, before, 2);
    sample(&b, after, 2);
    struct lproc_id gone = {0, 0};
    CHECK_EQ_INT(lproc_usage_lost(&a, &b, &gone), 1);
    CHECK_EQ_INT(gone.pid, 101);
    CHECK_EQ_U64(gone.start, 2);
}

/* A process that started between the samples takes nothing from the
 * sums: only part of its time is in them, as it should be. */
TEST(a_new_process_loses_nothing)
{
    struct lproc_id before[] = {{100, 1}};
    struct lproc_id after[] = {{100, 1}, {104, 5}};
    sample(&a, before, 1);
    sample(&b, after, 2);
    struct lproc_id gone = {0, 0};
    CHECK_EQ_INT(lproc_usage_lost(&a, &b, &gone), 0);
}

/* The real thing: a sample of our own tree holds a child; once the child
 * is killed, the next sample lacks it. */
TEST(a_killed_child_is_lost_from_the_tree)
{
    pid_t child = fork();
    if (!CHECK(child >= 0))
        return;
    if (child == 0) {
        pause();
        _exit(0);
    }
    int rc = lproc_usage_tree(getpid(), &a);
    CHECK_EQ_INT(rc, 0);
    int found = 0;
    for (int i = 0; i < a.nproc; i++)
        found |= a.procs[i].pid == child;
    CHECK(found);
    CHECK_EQ_INT(a.procs[0].pid, getpid()); /* the root first */
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    CHECK_EQ_INT(lproc_usage_tree(getpid(), &b), 0);
    struct lproc_id gone = {0, 0};
    CHECK_EQ_INT(lproc_usage_lost(&a, &b, &gone), 1);
    CHECK_EQ_INT(gone.pid, child);
    CHECK_EQ_INT(lproc_usage_lost(&b, &b, &gone), 0);
}
