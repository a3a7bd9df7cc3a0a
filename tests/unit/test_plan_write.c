/* models/plan_write.c: a file range sent from a cached file that shrank
 * under us. The send stops where the file ends (-EIO: the connection is
 * to close), and the cache entry is looked at again on the very next
 * lookup, in the same second, so the next answer announces the new size
 * instead of being cut the same way. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http/filecache.h"
#include "models/plan_write.h"
#include "unit.h"

#define BIG (100 * 1024)
#define SMALL (10 * 1024)

TEST(a_file_that_shrank_is_looked_at_again_at_once)
{
    char root[] = "/tmp/herd-unit-plan-XXXXXX";
    if (!CHECK(mkdtemp(root) != NULL))
        return;
    char path[64];
    snprintf(path, sizeof path, "%s/f.bin", root);
    char *data = calloc(1, BIG);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(data && fd >= 0 && write(fd, data, BIG) == BIG);
    close(fd);
    free(data);
    struct filecache_limits lim = {.max_entries = 16, .max_inline_size = 1024,
                                   .max_inline_total = 1 << 20};
    struct filecache *fc = fc_create(root, &lim);
    struct fc_entry *e = NULL, *again = NULL;
    time_t t = 1000;
    if (!CHECK(fc && fc_lookup(fc, "f.bin", 5, t, &e) == 0 && e->fd >= 0 && e->size == BIG))
        return;
    CHECK_EQ_INT(truncate(path, SMALL), 0);
    int sv[2];
    CHECK_EQ_INT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    int big = 1 << 20; /* room for the whole file: only its end stops the send */
    setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    off_t off = 0;
    uint64_t sent = 0;
    CHECK_EQ_INT(plan_send_file(sv[0], NULL, e, &off, BIG, &sent), -EIO);
    CHECK(off == SMALL && sent == SMALL);
    fc_release(e);
    /* the same second: the entry is not trusted for it any more */
    if (CHECK_EQ_INT(fc_lookup(fc, "f.bin", 5, t, &again), 0)) {
        CHECK(again->size == SMALL);
        fc_release(again);
    }
    close(sv[0]);
    close(sv[1]);
    fc_destroy(fc);
    unlink(path);
    rmdir(root);
}

