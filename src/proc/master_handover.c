/* The master's side of handing connections over on a reload (issue 13,
 * proc/handover.h): a channel per worker process; what an old worker
 * sends is passed on to a worker of the current generation, preferably
 * the one with the same worker index, or bounced back to its sender when
 * no channel takes it. The master holds no connection between events, so
 * nothing here needs a queue or a timer; each batch it placed is
 * acknowledged, so an old worker leaves only once its connections have
 * arrived somewhere. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "proc/master_internal.h"

#define BATCH 64 /* messages per event: the master has other work */

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

/* What an old worker in slot sent: place it, or bounce it back. */
static int forward(struct master *m, int slot, struct handover_msg *h, const void *in, int fd)
{
    if (h->kind == HO_CONN && !m->stopping && place(m, m->w[slot].index, h, in, fd) == 0)
        return 1;
    /* upgraded: the new master takes it (and bounces it back if it cannot) */
    h->pad = (uint32_t)slot;
    if (h->kind == HO_CONN && m->succ_fd >= 0 && handover_send(m->succ_fd, h, in, fd) == 0)
        return 1;
    h->kind = HO_BOUNCE;
    int rc = handover_send(m->ho[slot], h, in, fd);
    if (rc < 0)
        log_msg(LOG_ERROR, "handover: no worker could take a connection and slot %d cannot "
                "take it back (%s): closing it", slot, strerror(-rc));
    return 0;
}

void master_handover_event(struct master *m, int slot)
{
    static char in[HANDOVER_IN_MAX];
    struct handover_msg h;
    uint32_t placed = 0;
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
        placed += (uint32_t)forward(m, slot, &h, in, fd);
        close(fd); /* the new holder has its own reference now */
    }
    if (placed && m->ho[slot] >= 0) {
        struct handover_msg ack = {.kind = HO_ACK, .count = placed};
        if (handover_send(m->ho[slot], &ack, NULL, -1) < 0)
            log_msg(LOG_WARN, "handover: cannot acknowledge %u connections to slot %d; it "
                    "waits for its shutdown timeout", placed, slot);
    }
}

void master_handover_close(struct master *m, int slot)
{
    if (m->ho[slot] < 0)
        return;
    loop_del(&m->loop, m->ho[slot]);
    close(m->ho[slot]);
    m->ho[slot] = -1;
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
        if (rc == 0) { /* the old master has gone */
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
            h.kind = HO_BOUNCE;
            if (handover_send(m->pred_fd, &h, in, fd) < 0)
                log_msg(LOG_ERROR, "handover: a connection from the old master could not "
                        "be placed nor sent back: closing it");
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
        if (rc == 1 && fd >= 0 && h.pad < SB_MAX_SLOTS && m->ho[h.pad] >= 0 &&
            handover_send(m->ho[h.pad], &h, in, fd) == 0) {
            close(fd);
            continue;
        }
        log_msg(LOG_ERROR, "handover: a connection the new master sent back has no worker "
                "here to go to: closing it");
        if (fd >= 0)
            close(fd);
    }
}

void master_handover_close_in_child(struct master *m)
{
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
