#include "core/signals.h"

#include <errno.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

int signals_open(void)
{
    signal(SIGPIPE, SIG_IGN);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGQUIT);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGUSR2);
    sigaddset(&set, SIGCHLD);
    if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
        return -errno;
    int fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

int signals_read(int sfd)
{
    struct signalfd_siginfo si;
    ssize_t n = read(sfd, &si, sizeof si);
    return n == (ssize_t)sizeof si ? (int)si.ssi_signo : 0;
}
