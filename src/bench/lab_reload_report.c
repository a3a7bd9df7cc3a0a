/* The reload scenario's part of report.md and report.json: a table per
 * signal (errors per reload, p99 around the reloads and away from them),
 * and every figure, per reload, in the JSON. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bench/json.h"
#include "bench/lab_internal.h"

static int has_runs(const struct lab *lab, int sig)
{
    for (int i = 0; i < lab->nservers; i++)
        for (int c = 0; lab->servers[i].reload && c < lab->cfg->nconc; c++)
            if (lab->servers[i].reload[sig * lab->cfg->nconc + c].p.done)
                return 1;
    return 0;
}

static void errors_by_kind(char *buf, size_t n, const struct lab_point *p)
{
    size_t o = 0;
    buf[0] = 0;
    for (int k = 0; k < LOAD_NERR && o < n; k++)
        if (p->errors[k])
            o += (size_t)snprintf(buf + o, n - o, "%s%s %llu", o ? ", " : "", load_err_names[k],
                                  (unsigned long long)p->errors[k]);
    if (!buf[0])
        snprintf(buf, n, "-");
}

static void row(FILE *f, const struct lab *lab, const struct lab_server *s, int sig, int ci)
{
    const struct lab_reload_run *r = &s->reload[sig * lab->cfg->nconc + ci];
    int conc = lab->cfg->conc[ci];
    if (!r->p.ok) {
        fprintf(f, "| %s | %d | failed: %s | | | | | | | | | |\n", s->label, conc, r->p.reason);
        return;
    }
    char req[32], rps[32], near[32], away[32], kinds[200], per[400] = "", p99s[400] = "";
    lab_fmt_num(req, sizeof req, (double)r->p.requests);
    lab_fmt_num(rps, sizeof rps, r->p.rps);
    lab_fmt_us(near, sizeof near, r->p99_near_us);
    lab_fmt_us(away, sizeof away, r->p99_away_us);
    errors_by_kind(kinds, sizeof kinds, &r->p);
    int gone = 0;
    for (int k = 0, o = 0, q = 0; k < r->nmarks; k++) {
        char us[32];
        lab_fmt_us(us, sizeof us, r->marks[k].p99_us);
        o += snprintf(per + o, sizeof per - (size_t)o, "%s%llu", k ? " " : "",
                      (unsigned long long)r->marks[k].errors);
        q += snprintf(p99s + q, sizeof p99s - (size_t)q, "%s%s", k ? " / " : "", us);
        gone += r->marks[k].old_gone;
    }
    fprintf(f, "| %s | %d | %s | %s | %llu | %s | %.1f (%s) | %s | %s | %s | %llu | %d of %d |\n",
            s->label, conc, req, rps, (unsigned long long)r->p.errors_total, kinds,
            r->nmarks ? (double)r->p.errors_total / r->nmarks : 0.0, per, near, away, p99s,
            (unsigned long long)r->p.errors[LERR_STATUS], gone, r->nmarks);
}

void lab_reload_md(FILE *f, const struct lab *lab)
{
    const struct lab_config *cfg = lab->cfg;
    fprintf(f, "## How to read this\n\n"
               "Each run starts the server afresh, runs `herd load -t 1 -c N` (keep-alive, "
               "closed loop, no retries) for %d x %lld ms after %lld ms of warm-up, and sends "
               "the signal to the server's master every %lld ms, %d times. herd load records "
               "%d ms slices (`--timeline`), so errors and latency are placed in time. "
               "*errors/reload*: all errors of the run over the signals sent, then the errors "
               "from %d ms before each signal to %d ms before the next. *p99 near*: the "
               "responses within ±%d ms of a signal; *p99 away*: all others; *p99 per "
               "reload*: within ±%d ms of each. *old gone*: at the next signal (or the end), "
               "the server had as many processes as at the start (after USR2: and the old "
               "master had exited). *HTTP ≥400*: responses with such a status (herd load "
               "counts 1xx/3xx as success; none are expected here). Latency figures come "
               "from 1/8-octave bins (within about 5%%). Charts: reload-cN-SIGNAL.svg, req/s "
               "per slice, one line per server, a vertical mark at each signal.\n\n",
            cfg->reloads + 1, (long long)cfg->reload_every_ms, (long long)cfg->warmup_ms,
            (long long)cfg->reload_every_ms, cfg->reloads, 100, LAB_RELOAD_WINDOW_MS,
            LAB_RELOAD_WINDOW_MS, LAB_RELOAD_WINDOW_MS, LAB_RELOAD_WINDOW_MS);
    for (int sig = 0; sig < LAB_NSIG; sig++) {
        if (!cfg->signals[sig] || !has_runs(lab, sig))
            continue;
        fprintf(f, "## %s\n\n", sig == LAB_SIG_HUP ? "HUP (reload)" : "USR2 (binary upgrade)");
        fprintf(f, "| server | c | requests | req/s | errors | by kind | errors/reload "
                   "(per reload) | p99 near | p99 away | p99 per reload | HTTP ≥400 | old gone |\n"
                   "| --- | ---: | ---: | ---: | ---: | --- | --- | ---: | ---: | --- | ---: "
                   "| --- |\n");
        for (int i = 0; i < lab->nservers; i++) {
            const struct lab_server *s = &lab->servers[i];
            for (int ci = 0; s->reload && ci < cfg->nconc; ci++)
                if (s->reload[sig * cfg->nconc + ci].p.done)
                    row(f, lab, s, sig, ci);
        }
        fprintf(f, "\n");
        for (int i = 0; i < lab->nservers; i++)
            for (int ci = 0; lab->servers[i].reload && ci < cfg->nconc; ci++) {
                const struct lab_reload_run *r = &lab->servers[i].reload[sig * cfg->nconc + ci];
                if (r->note[0])
                    fprintf(f, "> Note: %s, c=%d: %s.\n\n", lab->servers[i].label,
                            cfg->conc[ci], r->note);
            }
    }
}

static void jnum(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.10g", v);
    else
        fputs("null", f);
}

static void jrun(FILE *f, const struct lab *lab, const struct lab_server *s, int sig, int ci)
{
    const struct lab_reload_run *r = &s->reload[sig * lab->cfg->nconc + ci];
    fprintf(f, "    {\"server\": ");
    json_write_str(f, s->label);
    fprintf(f, ", \"signal\": \"%s\", \"concurrency\": %d, \"ok\": %s", lab_signal_names[sig],
            lab->cfg->conc[ci], r->p.ok ? "true" : "false");
    if (!r->p.ok) {
        fprintf(f, ", \"reason\": ");
        json_write_str(f, r->p.reason);
        fputs("}", f);
        return;
    }
    fprintf(f, ", \"requests\": %llu, \"requests_per_sec\": ", (unsigned long long)r->p.requests);
    jnum(f, r->p.rps);
    fprintf(f, ", \"errors_total\": %llu, \"errors\": {", (unsigned long long)r->p.errors_total);
    for (int k = 0; k < LOAD_NERR; k++)
        fprintf(f, "%s\"%s\": %llu", k ? ", " : "", load_err_names[k],
                (unsigned long long)r->p.errors[k]);
    fprintf(f, "}, \"http_4xx_5xx\": %llu, \"errors_per_reload\": ",
            (unsigned long long)r->p.errors[LERR_STATUS]);
    jnum(f, r->nmarks ? (double)r->p.errors_total / r->nmarks : NAN);
    fprintf(f, ", \"errors_before_first\": %llu,\n     \"latency_us\": {\"p99\": ",
            (unsigned long long)r->errors_before);
    jnum(f, r->p.lat_us[LAT_P99]);
    fprintf(f, ", \"p99_near_reloads\": ");
    jnum(f, r->p99_near_us);
    fprintf(f, ", \"p99_away\": ");
    jnum(f, r->p99_away_us);
    fprintf(f, ", \"max\": ");
    jnum(f, r->p.lat_us[LAT_MAX]);
    fprintf(f, "}, \"window_ms\": %d,\n     \"reloads\": [", LAB_RELOAD_WINDOW_MS);
    for (int k = 0; k < r->nmarks; k++) {
        const struct lab_reload_mark *m = &r->marks[k];
        fprintf(f, "%s{\"t_s\": ", k ? ", " : "");
        jnum(f, m->t_s);
        fprintf(f, ", \"master\": %d, \"errors\": %llu, \"p99_us\": ", (int)m->master,
                (unsigned long long)m->errors);
        jnum(f, m->p99_us);
        fprintf(f, ", \"old_generation_gone\": %s, \"processes\": %d}",
                m->old_gone ? "true" : "false", m->procs_left);
    }
    fprintf(f, "],\n     \"note\": ");
    json_write_str(f, r->note);
    fprintf(f, ", \"slice_s\": ");
    jnum(f, r->slice_s);
    fprintf(f, ", \"requests_per_sec_by_slice\": [");
    for (int i = 0; i < r->nslices; i++) {
        fputs(i ? ", " : "", f);
        fprintf(f, "%.0f", r->rps[i]);
    }
    fprintf(f, "], \"raw\": ");
    json_write_str(f, r->p.raw);
    fputs("}", f);
}

void lab_reload_json(FILE *f, const struct lab *lab)
{
    const struct lab_config *cfg = lab->cfg;
    fprintf(f, "  \"reload\": {\"reloads\": %d, \"reload_every_ms\": %lld, \"workers\": %d, "
               "\"signals\": [",
            cfg->reloads, (long long)cfg->reload_every_ms, cfg->reload_workers);
    for (int sig = 0, n = 0; sig < LAB_NSIG; sig++)
        if (cfg->signals[sig])
            fprintf(f, "%s\"%s\"", n++ ? ", " : "", lab_signal_names[sig]);
    fprintf(f, "], \"runs\": [\n");
    int first = 1;
    for (int sig = 0; sig < LAB_NSIG; sig++)
        for (int i = 0; i < lab->nservers; i++)
            for (int ci = 0; lab->servers[i].reload && ci < cfg->nconc; ci++) {
                if (!lab->servers[i].reload[sig * cfg->nconc + ci].p.done)
                    continue;
                fputs(first ? "" : ",\n", f);
                first = 0;
                jrun(f, lab, &lab->servers[i], sig, ci);
            }
    fprintf(f, "\n  ]},\n");
}
