#include "net/tls_tickets.h"

#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>

struct ticket_key {
    unsigned char name[16];
    unsigned char aes[32];
    unsigned char hmac[32];
};

struct tls_tickets {
    uint32_t seq;               /* odd while the master writes */
    struct ticket_key cur, prev;
};

/* The ticket callback has no argument: one key set per process. */
static struct tls_tickets *keys;

static void make_key(struct ticket_key *k)
{
    if (RAND_bytes((unsigned char *)k, sizeof *k) != 1)
        memset(k, 0, sizeof *k); /* never used: a zero name matches no ticket we made */
}

struct tls_tickets *tls_tickets_create(void)
{
    struct tls_tickets *t = mmap(NULL, sizeof *t, PROT_READ | PROT_WRITE,
                                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (t == MAP_FAILED)
        return NULL;
    make_key(&t->cur);
    make_key(&t->prev);
    return t;
}

void tls_tickets_rotate(struct tls_tickets *t)
{
    struct ticket_key k;
    make_key(&k);
    __atomic_add_fetch(&t->seq, 1, __ATOMIC_ACQ_REL);
    t->prev = t->cur;
    t->cur = k;
    __atomic_add_fetch(&t->seq, 1, __ATOMIC_RELEASE);
    OPENSSL_cleanse(&k, sizeof k);
}

/* The keys as the master last wrote them: 0, or -1 when a write never
 * ends. The master's copy takes nanoseconds; a sequence that stays odd
 * for a million looks means it died inside one (SIGKILL), and spinning on
 * would hold this thread at 100% CPU for good: such a handshake gets no
 * ticket and resumes nothing instead. */
static int snapshot_of(struct tls_tickets *t, struct ticket_key *cur, struct ticket_key *prev)
{
    for (long tries = 0; tries < 1000000; tries++) {
        uint32_t s1 = __atomic_load_n(&t->seq, __ATOMIC_ACQUIRE);
        if (s1 & 1)
            continue;
        *cur = t->cur;
        *prev = t->prev;
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&t->seq, __ATOMIC_RELAXED) == s1)
            return 0;
    }
    return -1;
}

static int snapshot(struct ticket_key *cur, struct ticket_key *prev)
{
    return snapshot_of(keys, cur, prev);
}

_Static_assert(2 * sizeof(struct ticket_key) == TLS_TICKETS_WIRE, "the wire holds two keys");

int tls_tickets_save(struct tls_tickets *t, unsigned char out[TLS_TICKETS_WIRE])
{
    struct ticket_key cur, prev;
    int rc = snapshot_of(t, &cur, &prev);
    if (rc == 0) {
        memcpy(out, &cur, sizeof cur);
        memcpy(out + sizeof cur, &prev, sizeof prev);
    }
    OPENSSL_cleanse(&cur, sizeof cur);
    OPENSSL_cleanse(&prev, sizeof prev);
    return rc;
}

void tls_tickets_restore(struct tls_tickets *t, const unsigned char in[TLS_TICKETS_WIRE])
{
    __atomic_add_fetch(&t->seq, 1, __ATOMIC_ACQ_REL);
    memcpy(&t->cur, in, sizeof t->cur);
    memcpy(&t->prev, in + sizeof t->cur, sizeof t->prev);
    __atomic_add_fetch(&t->seq, 1, __ATOMIC_RELEASE);
}

static int mac_init(EVP_MAC_CTX *hctx, const struct ticket_key *k)
{
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0),
        OSSL_PARAM_construct_end(),
    };
    return EVP_MAC_init(hctx, k->hmac, sizeof k->hmac, params);
}

/* OpenSSL's contract: 1 ok, 2 ok but renew the ticket, 0 unknown key (a
 * full handshake), -1 error. */
static int ticket_cb(SSL *ssl, unsigned char name[16], unsigned char *iv,
                     EVP_CIPHER_CTX *cctx, EVP_MAC_CTX *hctx, int enc)
{
    (void)ssl;
    struct ticket_key cur, prev;
    if (snapshot(&cur, &prev) < 0)
        return 0; /* enc: no ticket; dec: a full handshake */
    int rc = -1;
    if (enc) {
        memcpy(name, cur.name, 16);
        if (RAND_bytes(iv, 16) == 1 &&
            EVP_EncryptInit_ex(cctx, EVP_aes_256_cbc(), NULL, cur.aes, iv) == 1 &&
            mac_init(hctx, &cur) == 1)
            rc = 1;
    } else {
        const struct ticket_key *k = !memcmp(name, cur.name, 16) ? &cur
                                     : !memcmp(name, prev.name, 16) ? &prev : NULL;
        if (!k)
            rc = 0;
        else if (EVP_DecryptInit_ex(cctx, EVP_aes_256_cbc(), NULL, k->aes, iv) == 1 &&
                 mac_init(hctx, k) == 1)
            rc = k == &cur ? 1 : 2;
    }
    OPENSSL_cleanse(&cur, sizeof cur);
    OPENSSL_cleanse(&prev, sizeof prev);
    return rc;
}

void tls_tickets_attach(struct tls_tickets *t, void *ctx)
{
    keys = t;
    SSL_CTX_set_tlsext_ticket_key_evp_cb((SSL_CTX *)ctx, ticket_cb);
}
