/* The one place signals are handled: they are blocked in every thread and
 * read from a signalfd inside the event loop. SIGPIPE is ignored (sends
 * use MSG_NOSIGNAL too, and EPIPE closes the connection quietly). */
#ifndef HERD_SIGNALS_H
#define HERD_SIGNALS_H

/* Blocks TERM, INT, QUIT, HUP, USR1, USR2, CHLD and returns a non-blocking
 * signalfd for them, or -errno. */
int signals_open(void);

/* Reads one pending signal number, 0 when none is pending. */
int signals_read(int sfd);

#endif
