/* The FastCGI side of the reverse proxy's driver: the docroot the scripts
 * are found in, the route a request takes (http/fcgi_route.c), and the
 * parameters of an exchange (http/fcgi_params.c) from the client's
 * connection: its address (the PROXY-protocol client when there is one)
 * and the address it reached. The codec is http/fcgi_codec.c. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "http/path.h"
#include "models/upstream_internal.h"

void upstream_fcgi_init(struct proxy *px)
{
    px->root_fd = -1;
    int any = 0;
    for (int i = 0; i < px->cfg->nroutes; i++)
        any |= px->cfg->routes[i].fastcgi;
    if (!any)
        return;
    px->root_fd = open(px->cfg->docroot, O_PATH | O_DIRECTORY | O_CLOEXEC);
    px->docroot = realpath(px->cfg->docroot, NULL);
    px->kinds = calloc(1, sizeof *px->kinds);
    if (px->root_fd < 0 || !px->docroot || !px->kinds)
        log_fatal("fastcgi: docroot %s: cannot open it", px->cfg->docroot);
    size_t n = strlen(px->docroot);
    if (n > 1 && px->docroot[n - 1] == '/')
        px->docroot[n - 1] = 0;
}

void upstream_fcgi_destroy(struct proxy *px)
{
    if (px->root_fd >= 0)
        close(px->root_fd);
    free(px->docroot);
    free(px->kinds);
}

static void rules_of(const struct proxy *px, struct fcgi_rules *r)
{
    *r = (struct fcgi_rules){px->cfg->routes, px->cfg->nroutes, px->cfg->fastcgi_index,
                             px->cfg->fastcgi_fallback, px->root_fd, px->kinds, clock_wall()};
}

int upstream_fcgi_route(struct proxy *px, const struct http_request *req, size_t len)
{
    px->ft_path = NULL;
    if (px->root_fd < 0)
        return -1;
    struct fcgi_rules r;
    rules_of(px, &r);
    if (fcgi_resolve(&r, px->path, len, &px->ft) < 0)
        return -1;
    px->ft_path = req->path.p;
    px->ft_path_len = req->path.len;
    px->ft_norm_len = len;
    return px->ft.route;
}

static unsigned addr_text(const struct sockaddr_storage *ss, char *buf, size_t n)
{
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
        inet_ntop(AF_INET, &a->sin_addr, buf, (socklen_t)n);
        return ntohs(a->sin_port);
    }
    if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
        inet_ntop(AF_INET6, &a->sin6_addr, buf, (socklen_t)n);
        return ntohs(a->sin6_port);
    }
    snprintf(buf, n, "unix:");
    return 0;
}

long upstream_fcgi_head(struct proxy *px, struct xfer *x, const struct http_request *req,
                        char *buf, size_t cap)
{
    /* The route was chosen for this request just before (upstream_route,
     * which left the script in px->ft): a driver starts the exchange
     * right after. Anything else in between looks the script up again. */
    int n = (int)px->ft_norm_len;
    if (px->ft_path != req->path.p || px->ft_path_len != req->path.len) {
        n = path_normalize(req->path.p, req->path.len, px->path, px->path_cap);
        if (n < 0 || upstream_fcgi_route(px, req, (size_t)n) < 0)
            return -2;
    }
    px->ft_path = NULL; /* used once */
    if (req->chunked)
        return -3;
    const struct fcgi_target *t = &px->ft;
    size_t tl = t->script_len < sizeof x->tag - 1 ? t->script_len : sizeof x->tag - 1;
    memcpy(x->tag, t->script, tl);
    x->tag[tl] = 0;
    x->resp_body.tag = x->tag;
    struct sockaddr_storage peer, local;
    step_peer(x->st, &peer);
    char raddr[INET6_ADDRSTRLEN + 8], laddr[INET6_ADDRSTRLEN + 8];
    unsigned rport = addr_text(&peer, raddr, sizeof raddr);
    socklen_t ll = sizeof local;
    if (getsockname(x->client_fd, (struct sockaddr *)&local, &ll) < 0)
        local.ss_family = AF_UNIX;
    unsigned lport = addr_text(&local, laddr, sizeof laddr);
    /* DOCUMENT_URI is the script's URI (with PATH_INFO), as nginx's
     * $document_uri after try_files or index */
    int whole = t->info_len || (t->script_len == (size_t)n && !memcmp(t->script, px->path, (size_t)n));
    const char *const *extra = NULL;
    const char *ex[CONFIG_MAX_FASTCGI_PARAMS];
    for (int i = 0; i < px->cfg->nfastcgi_params; i++)
        ex[i] = px->cfg->fastcgi_params[i];
    extra = ex;
    const struct fcgi_env env = {
        .docroot = px->docroot,
        .script = t->script, .script_len = t->script_len,
        .path_info = px->path + t->info_off, .path_info_len = t->info_len,
        .uri = whole ? px->path : t->script, .uri_len = whole ? (size_t)n : t->script_len,
        .remote_addr = raddr, .remote_port = rport,
        .server_addr = laddr, .server_port = lport,
        .https = x->client_ssl != NULL,
        .extra = extra, .nextra = px->cfg->nfastcgi_params,
    };
    const struct upstream_req_info info = {.fcgi = &env, .https = x->client_ssl != NULL};
    return x->codec->request_head(req, &info, buf, cap);
}
