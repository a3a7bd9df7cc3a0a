/* The master's side of handing connections over on a reload (issue 13,
 * proc/handover.h): a channel per worker process; what an old worker
 * sends is passed on to a worker of the current generation, preferably
 * the one with the same worker index, or bounced back to its sender when
 * no channel takes it. Each connection placed is acknowledged, so an old
 * worker leaves only once its connections have arrived somewhere. When
 * every channel is full (a small net.core.wmem_max, workers slow to read)
 * the master holds what it could neither place nor bounce, and the
 * acknowledgements it owes, and tries again every few ms: closing the
 * connection instead reset a client's request, and a dropped
 * acknowledgement kept the old worker to its shutdown timeout. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "proc/master_internal.h"

#define BATCH 64    /* messages per event: the master has other work */
#define RETRY_MS 10 /* a connection or acknowledgement a full channel refused: the next try */

/* A connection no channel took yet, and where it is bound. */
enum held_how {
    HELD_FORWARD,   /* from an old worker of ours: place it, or bounce it back */
    HELD_BOUNCE,    /* old master: the new one sent it back; to its old worker */
    HELD_BACK,      /* new master: from the old one; place it, or send it back */
};

struct ho_held {
    int how;                /* enum held_how */
    int slot;               /* the old worker's, for the bounce and the ack... */
    pid_t pid;              /* ...while that worker still holds the slot */
    int fd;
    struct handover_msg h;
    char *in;               /* h.in_len unparsed bytes, or NULL */
};

int master_handover_open(struct master *m, int slot)
{
    int sv[2];
    int rc = handover_channel(sv);
    if (rc < 0)
        return rc;
    if (loop_add(&m->loop, sv[0], EPOLLIN, TAG_HANDOVER | (uint64_t)slot) < 0) {
        rc = -errno;
        close(sv[0]);
        close(sv[1]);
        return rc;
    }
    m->ho[slot] = sv[0];
    return sv[1];
}

/* Sends one connection on to a worker of the current generation: the one
 * with worker index `index` first. 0 or -EAGAIN (nobody took it). */
static int place(struct master *m, int index, const struct handover_msg *h, const void *in,
                 int fd)
{
    for (int pass = 0; pass < 2; pass++) {
        for (int s = 0; s < nslots(m); s++) {
            const struct wproc *w = &m->w[s];
            if (!w->pid || !w->first || w->draining || w->gen != m->gen || m->ho[s] < 0 ||
                (pass == 0) != (w->index == index))
                continue;
            if (handover_send(m->ho[s], h, in, fd) == 0)
                return 0;
        }
    }
    return -EAGAIN;
}

enum { FWD_PLACED, FWD_BOUNCED, FWD_FULL };

/* What an old worker in slot sent: place it, or bounce it back unless
 * that worker has gone; FWD_FULL when no channel took it (the caller
 * keeps fd and tries again). */
static int forward(struct master *m, int slot, int sender_here, struct handover_msg *h,
                   const void *in, int fd)
{
    if (!m->stopping && place(m, m->w[slot].index, h, in, fd) == 0)
        return FWD_PLACED;
    /* upgraded: the new master takes it (and bounces it back if it
     * cannot); not a TLS connection with nothing read yet, which a build
     * from before HO_TLS_FRESH would refuse (proc/handover.h): it stays and
     * handshakes here, as it did before that */
    h->pad = (uint32_t)slot;
    if (m->succ_fd >= 0 && !(h->state_len & HO_TLS_FRESH) &&
        handover_send(m->succ_fd, h, in, fd) == 0)
        return FWD_PLACED;
    if (!sender_here || m->ho[slot] < 0) /* nobody to give it back to */
        return FWD_FULL;
    struct handover_msg back = *h;
    back.kind = HO_BOUNCE;
    /* full, or its worker has just exited (the reap closes the channel,
     * and then the connection goes to a new worker or closes) */
    return handover_send(m->ho[slot], &back, in, fd) == 0 ? FWD_BOUNCED : FWD_FULL;
}

/* Keeps a connection no channel took; 0, or -1 (out of memory: the
 * caller closes it). */
static int hold(struct master *m, int how, int slot, const struct handover_msg *h,
                const char *in, int fd)
{
    pid_t pid = slot >= 0 ? m->w[slot].pid : 0;
    if (m->nho_held == m->cap_ho_held) {
        int cap = m->cap_ho_held ? m->cap_ho_held * 2 : 64;
        struct ho_held *n = realloc(m->ho_held, (size_t)cap * sizeof *n);
        if (!n)
            return -1;
        m->ho_held = n;
        m->cap_ho_held = cap;
    }
    char *copy = NULL;
    if (h->in_len && !(copy = malloc(h->in_len)))
        return -1;
    if (copy)
        memcpy(copy, in, h->in_len);
    m->ho_held[m->nho_held++] =
        (struct ho_held){.how = how, .slot = slot, .pid = pid, .fd = fd, .h = *h, .in = copy};
    return 0;
}

static void owe_ack(struct master *m, int slot)
{
    if (m->ho[slot] < 0)
        return; /* it has gone: nobody waits for it */
    m->ho_owed[slot]++;
}

/* One more try for a held connection: 1 when it has gone somewhere (or
 * cannot go anywhere: it is closed then), 0 to keep it. A worker that has
 * gone may have left its slot to a new one: no bounce or ack goes there. */
static int retry_one(struct master *m, struct ho_held *e)
{
    int here = e->slot >= 0 && m->w[e->slot].pid == e->pid && m->ho[e->slot] >= 0;
    if (e->how == HELD_FORWARD) {
        int r = forward(m, e->slot, here, &e->h, e->in, e->fd);
        if (r == FWD_FULL && here)
            return 0;
        if (r == FWD_PLACED && here)
            owe_ack(m, e->slot);
        else if (r == FWD_FULL)
            log_msg(LOG_ERROR, "handover: a connection from a worker that has gone found no "
                    "worker to take it: closing it");
        return 1;
    }
    if (e->how == HELD_BOUNCE) {
        if (here && handover_send(m->ho[e->slot], &e->h, e->in, e->fd) < 0)
            return 0;
        if (!here)
            log_msg(LOG_ERROR, "handover: a connection the new master sent back has no "
                    "worker here to go to: closing it");
        return 1;
    }
    if (!m->stopping && place(m, -1, &e->h, e->in, e->fd) == 0)
        return 1;
    struct handover_msg back = e->h;
    back.kind = HO_BOUNCE;
    if (m->pred_fd >= 0 && handover_send(m->pred_fd, &back, e->in, e->fd) < 0)
        return 0;
    if (m->pred_fd < 0)
        log_msg(LOG_ERROR, "handover: a connection from the old master could not be placed "
                "nor sent back: closing it");
    return 1;
}

/* Tries the held connections again, oldest first (only_back: those bound
 * back to the old master). */
static void retry_held(struct master *m, int only_back)
{
    int kept = 0;
    for (int i = 0; i < m->nho_held; i++) {
        struct ho_held *e = &m->ho_held[i];
        if ((only_back && e->how != HELD_BACK) || !retry_one(m, e)) {
            m->ho_held[kept++] = *e;
            continue;
        }
        close(e->fd);
        free(e->in);
    }
    m->nho_held = kept;
}

static int held_back(const struct master *m)
{
    for (int i = 0; i < m->nho_held; i++)
        if (m->ho_held[i].how == HELD_BACK)
            return 1;
    return 0;
}

/* The old worker in slot leaves once every connection it sent is placed
 * or back, so what it is owed goes now, or (its channel full: a small
 * net.core.wmem_max, a worker slow to read) with the next event or retry,
 * summed into one message; giving up here kept it to its shutdown timeout. */
static void send_acks(struct master *m, int slot)
{
    if (!m->ho_owed[slot] || m->ho[slot] < 0)
        return;
    struct handover_msg ack = {.kind = HO_ACK, .count = m->ho_owed[slot]};
    if (handover_send(m->ho[slot], &ack, NULL, -1) < 0)
        return;
    m->ho_owed[slot] = 0;
}

void master_handover_event(struct master *m, int slot)
{
    static char in[HANDOVER_IN_MAX];
    struct handover_msg h;
    for (int i = 0; i < BATCH && m->ho[slot] >= 0; i++) {
        int fd;
        int rc = handover_recv(m->ho[slot], &h, in, sizeof in, &fd);
        if (rc == -EAGAIN)
            break;
        if (rc == -ECONNRESET)
            /* The worker exited with an acknowledgement of ours unread. A
             * seqpacket socket reports that before the messages still
             * queued (connections it handed over as it went): read on,
             * to them and to the EOF. */
            continue;
        if (rc == 0) {
            master_handover_close(m, slot); /* the worker has exited */
            break;
        }
        if (rc < 0 || h.kind != HO_CONN || fd < 0) {
            log_msg(LOG_ERROR, "handover from slot %d: %s", slot,
                    rc == -EMFILE ? "out of file descriptors: a connection was lost"
                    : rc < 0 ? strerror(-rc) : "not a connection");
            if (fd >= 0)
                close(fd);
            continue;
        }
        int r = forward(m, slot, 1, &h, in, fd);
        if (r == FWD_FULL && hold(m, HELD_FORWARD, slot, &h, in, fd) == 0)
            continue; /* the master keeps its reference until a channel takes it */
        if (r == FWD_PLACED)
            owe_ack(m, slot);
        else if (r == FWD_FULL)
            log_msg(LOG_ERROR, "handover: out of memory holding a connection no channel "
                    "took: closing it");
        close(fd); /* the new holder has its own reference now */
    }
    send_acks(m, slot);
}

int master_handover_retry(struct master *m)
{
    if (m->nho_held)
        retry_held(m, 0);
    int owing = 0;
    for (int s = 0; s < nslots(m); s++) {
        send_acks(m, s);
        owing |= m->ho_owed[s] != 0;
    }
    return m->nho_held || owing ? RETRY_MS : -1;
}

void master_handover_close(struct master *m, int slot)
{
    m->ho_owed[slot] = 0;
    if (m->ho[slot] < 0)
        return;
    loop_del(&m->loop, m->ho[slot]);
    close(m->ho[slot]);
    m->ho[slot] = -1;
}

/* New master, before the channel from the old one closes: what waits to
 * go back to it goes now. On our way out (pred_end: the old master is
 * there and reads) that is worth a second of tries; once it has gone,
 * one try, and the rest close. */
static void give_back_held(struct master *m)
{
    int64_t until = clock_now_ms() + (m->stopping ? 1000 : 0);
    for (;;) {
        retry_held(m, 1);
        if (!held_back(m) || clock_now_ms() >= until)
            break;
        usleep(1000);
        clock_update();
    }
    if (!held_back(m))
        return;
    int fd = m->pred_fd;
    m->pred_fd = -1; /* what is left closes */
    retry_held(m, 1);
    m->pred_fd = fd;
}

/* New master: a connection from the old master's workers goes to one of
 * ours, or back (its pad names the old worker's slot). */
void master_handover_pred_event(struct master *m)
{
    static char in[HANDOVER_IN_MAX];
    struct handover_msg h;
    for (int i = 0; i < BATCH && m->pred_fd >= 0; i++) {
        int fd;
        int rc = handover_recv(m->pred_fd, &h, in, sizeof in, &fd);
        if (rc == -EAGAIN)
            break;
        if (rc == 0) { /* the old master has gone, or we stop (pred_end) */
            give_back_held(m);
            loop_del(&m->loop, m->pred_fd);
            close(m->pred_fd);
            m->pred_fd = -1;
            break;
        }
        if (rc < 0 || h.kind != HO_CONN || fd < 0) {
            log_msg(LOG_ERROR, "handover from the old master: %s",
                    rc < 0 ? strerror(-rc) : "not a connection");
            if (fd >= 0)
                close(fd);
            continue;
        }
        if (m->stopping || place(m, -1, &h, in, fd) < 0) {
            struct handover_msg back = h;
            back.kind = HO_BOUNCE;
            if (handover_send(m->pred_fd, &back, in, fd) < 0) {
                if (hold(m, HELD_BACK, -1, &h, in, fd) == 0)
                    continue;
                log_msg(LOG_ERROR, "handover: a connection from the old master could not "
                        "be placed nor sent back: closing it");
            }
        }
        close(fd);
    }
}

/* New master, on its way out (it was upgraded in turn): the old master's
 * sends fail from here on (it gives those connections back to its
 * workers), and those already queued go back too; an exit with them
 * queued would close them under their clients. */
void master_handover_pred_end(struct master *m)
{
    if (m->pred_fd < 0)
        return;
    m->stopping = 1;
    shutdown(m->pred_fd, SHUT_RD);
    while (m->pred_fd >= 0) /* the queue, then 0 as if it had gone */
        master_handover_pred_event(m);
}

/* Old master: the new one could not place a connection; its worker keeps it. */
void master_handover_succ_event(struct master *m)
{
    static char in[HANDOVER_IN_MAX];
    struct handover_msg h;
    for (int i = 0; i < BATCH && m->succ_fd >= 0; i++) {
        int fd;
        int rc = handover_recv(m->succ_fd, &h, in, sizeof in, &fd);
        if (rc == -EAGAIN)
            break;
        if (rc == 0) {
            loop_del(&m->loop, m->succ_fd);
            close(m->succ_fd);
            m->succ_fd = -1;
            break;
        }
        if (rc == 1 && fd >= 0 && h.pad < SB_MAX_SLOTS && m->ho[h.pad] >= 0) {
            if (handover_send(m->ho[h.pad], &h, in, fd) == 0) {
                close(fd);
                continue;
            }
            if (hold(m, HELD_BOUNCE, (int)h.pad, &h, in, fd) == 0)
                continue; /* its worker's channel is full: again shortly */
        }
        log_msg(LOG_ERROR, "handover: a connection the new master sent back has no worker "
                "here to go to: closing it");
        if (fd >= 0)
            close(fd);
    }
}

void master_handover_close_in_child(struct master *m)
{
    /* a held connection kept alive in a child that never serves it would
     * hang its client */
    for (int i = 0; i < m->nho_held; i++)
        close(m->ho_held[i].fd);
    if (m->pred_fd >= 0)
        close(m->pred_fd);
    if (m->succ_fd >= 0)
        close(m->succ_fd);
    if (m->up.ho_fd >= 0)
        close(m->up.ho_fd);
    for (int s = 0; s < SB_MAX_SLOTS; s++)
        if (m->ho[s] >= 0)
            close(m->ho[s]);
}
