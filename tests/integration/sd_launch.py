"""A socket-activation launcher for the tests, doing what systemd does
before it starts a service: the listening sockets become fds 3, 4, ...,
LISTEN_FDS counts them, LISTEN_FDNAMES names them and LISTEN_PID is this
process's pid, which exec keeps for the command.

usage: sd_launch.py [--pid-offset N] [--names A:B] [--count N] [--env K=V]
                    FD... -- COMMAND ARGS...

FDs are sockets this process inherited (subprocess.Popen(pass_fds=...)).
--pid-offset N sets LISTEN_PID to our pid + N: the sockets are then meant
for another process, and the command must ignore them. --count N makes
LISTEN_FDS say N whatever was passed (a broken launcher); --env K=V sets
another variable once the fds are in place (V may name one: "K={fd0}")."""

import fcntl
import os
import sys


def main(argv):
    if "--" not in argv:
        sys.exit(__doc__)
    sep = argv.index("--")
    opts, cmd = argv[:sep], argv[sep + 1:]
    offset, names, count, extra, fds = 0, None, None, {}, []
    i = 0
    while i < len(opts):
        if opts[i] == "--pid-offset":
            offset, i = int(opts[i + 1]), i + 2
        elif opts[i] == "--names":
            names, i = opts[i + 1], i + 2
        elif opts[i] == "--count":
            count, i = opts[i + 1], i + 2
        elif opts[i] == "--env":
            key, _, value = opts[i + 1].partition("=")
            extra[key], i = value, i + 2
        else:
            fds.append(int(opts[i]))
            i += 1
    # copy above both the sources and the targets, then into place
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 100) for fd in fds]
    for fd in fds:
        os.close(fd)
    for n, fd in enumerate(high):
        os.dup2(fd, 3 + n, inheritable=True)
        os.close(fd)
    env = dict(os.environ, LISTEN_FDS=count if count is not None else str(len(fds)),
               LISTEN_PID=str(os.getpid() + offset))
    if names is not None:
        env["LISTEN_FDNAMES"] = names
    env.update({k: v.format(**{f"fd{n}": 3 + n for n in range(len(fds))})
                for k, v in extra.items()})
    os.execve(cmd[0], cmd, env)


if __name__ == "__main__":
    main(sys.argv[1:])
