/* Output a blocked connection still owes (private to models/conn.c): the
 * unsent tail of a response batch, then at most one file range for sendfile.
 * Only bytes of the shared head buffer are copied (response heads, the
 * status page); bodies from the open-file cache stay where they are, held by
 * a reference, so a client that stops reading costs its heads, not its
 * files. Bodies that are static (error pages) are pointed to as they are. */
#ifndef HERD_MODELS_PENDING_H
#define HERD_MODELS_PENDING_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "http/filecache.h"
#include "net/tls.h"

struct pending {
    struct iovec *iov;       /* what is left, from iov[cur] on */
    int niov, cur;
    struct fc_entry **refs;  /* entries the iovecs point into */
    int nrefs;
    struct fc_entry *file;   /* then file[file_off, file_end) with sendfile */
    off_t file_off, file_end;
    /* the file goes only up to here until its next window is known to be
     * in the page cache (models/file_window.h); cold: one was not */
    off_t warm_end;
    unsigned char cold;
    /* iov, refs and the copied bytes follow in the same allocation */
};

/* Builds what is left of iov[0..niov) after its first `done` bytes, copying
 * only what lies in [copy_lo, copy_hi) (the head buffer, reused for the next
 * batch). Takes over refs[0..nrefs) and file (may be NULL). NULL when out of
 * memory: the references are released then. */
struct pending *pending_new(const struct iovec *iov, int niov, size_t done,
                            const char *copy_lo, const char *copy_hi,
                            struct fc_entry **refs, int nrefs,
                            struct fc_entry *file, off_t file_off, off_t file_end);

/* Writes what p owes to the non-blocking socket fd (through ssl when it
 * is not NULL: net/tls.h), the file only up to warm_end (MSG_MORE on the
 * bytes before it only when file bytes follow now); *sent gets the bytes
 * written. Returns 0 when all of that is out (see pending_file_left),
 * -EAGAIN when the socket is full, another -errno on failure (-EIO: the
 * file shrank under us). */
int pending_write(struct pending *p, int fd, SSL *ssl, uint64_t *sent);

/* Whether file bytes are still owed. */
static inline int pending_file_left(const struct pending *p)
{
    return p->file && p->file_off < p->file_end;
}

/* Releases the references and frees p. */
void pending_free(struct pending *p);

#endif
