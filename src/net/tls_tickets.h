/* Session-ticket keys shared by every worker: the master maps them (shared
 * memory, before it forks) and rotates them; workers only read them. So a
 * ticket one worker issued resumes on any other, and on workers of the
 * next generation after a HUP. Readers take a consistent copy under a
 * sequence counter (the master is the only writer). */
#ifndef HERD_NET_TLS_TICKETS_H
#define HERD_NET_TLS_TICKETS_H

struct tls_tickets;

/* Maps the keys and makes the first one. NULL when out of memory. */
struct tls_tickets *tls_tickets_create(void);

/* A new current key; the current one stays valid for decryption (its
 * tickets are renewed), the one before it is dropped. */
void tls_tickets_rotate(struct tls_tickets *t);

/* The keys as bytes, for a binary upgrade's new master (which takes them
 * with tls_tickets_restore, so tickets issued before the upgrade still
 * resume after it). 0, or -1 when no consistent copy could be had. */
#define TLS_TICKETS_WIRE 160
int tls_tickets_save(struct tls_tickets *t, unsigned char out[TLS_TICKETS_WIRE]);
void tls_tickets_restore(struct tls_tickets *t, const unsigned char in[TLS_TICKETS_WIRE]);

/* Issues and accepts tickets of ctx (an SSL_CTX *) with t's keys. */
void tls_tickets_attach(struct tls_tickets *t, void *ctx);

#endif
