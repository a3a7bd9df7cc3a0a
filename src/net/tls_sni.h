/* The server name a TLS ClientHello asks for (RFC 6066 3), read from the
 * raw server_name extension: herd picks the certificate, and binds the
 * session to the name, before OpenSSL looks for a session to resume. */
#ifndef HERD_NET_TLS_SNI_H
#define HERD_NET_TLS_SNI_H

#include <stddef.h>

#define TLS_SNI_MAX 255 /* RFC 6066: HostName is 1..2^16-1 bytes; DNS names end at 255 */

/* The first host_name of a server_name extension's body (ext, len bytes),
 * without one trailing '.' (an absolute name is the same host), into out
 * (at least TLS_SNI_MAX + 1 bytes), NUL-terminated. Returns its length, or
 * -1 when the extension is malformed, or the name is empty, too long or
 * holds a NUL: the caller treats that as no name (OpenSSL then refuses the
 * handshake itself). */
int tls_sni_from_ext(const unsigned char *ext, size_t len, char *out);

/* Does NAME (host name, or "*.domain" for one label) match host? Case is
 * ignored. */
int tls_sni_name_matches(const char *pattern, const char *host);

/* Is name[0..len) a NAME --tls-sni takes: a host name (labels of letters,
 * digits and '-', 1..63 bytes each, not starting or ending with '-',
 * dot-separated, no trailing dot, at most TLS_SNI_MAX bytes) or "*." and
 * one. A trailing dot is refused rather than kept: the client's name is
 * compared without one, so such a NAME would never match. */
int tls_sni_name_valid(const char *name, size_t len);

#endif
