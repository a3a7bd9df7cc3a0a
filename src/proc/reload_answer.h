/* The master's answer to a HUP, for `herd reload`: a signal carries no
 * reply, so after each reload attempt the master writes a small file next
 * to its pid file, PIDFILE.reload:
 *
 *     herd-reload PID STARTED ok|refused
 *     the lines it logged about this reload
 *
 * STARTED is CLOCK_MONOTONIC (ns) read after the master took the signal,
 * so a command that read the clock before sending HUP knows that an
 * answer started later is about a config read after its signal (an answer
 * to an earlier HUP started before it). The file is replaced atomically
 * (rename) and removed by the master that wrote it when it exits.
 * Functions return 0, or -1 with a one-line reason in err. */
#ifndef HERD_PROC_RELOAD_ANSWER_H
#define HERD_PROC_RELOAD_ANSWER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct reload_answer {
    pid_t pid;
    uint64_t started_ns;
    int ok;
    char text[2048];
};

/* CLOCK_MONOTONIC in nanoseconds: the clock STARTED is read on. */
uint64_t reload_answer_clock(void);

/* Nothing written (0) when pid_file is empty: no pid file, no answer. */
int reload_answer_write(const char *pid_file, const struct reload_answer *a, char *err,
                        size_t errlen);

/* 1 with *a filled, 0 when there is no (whole) answer file. */
int reload_answer_read(const char *pid_file, struct reload_answer *a);

/* Removes the answer file when it is pid's. */
void reload_answer_remove(const char *pid_file, pid_t pid);

#endif
