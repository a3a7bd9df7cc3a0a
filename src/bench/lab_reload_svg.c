/* The reload scenario's charts: for each (concurrency, signal), req/s per
 * timeline slice against time, one line per server, and a vertical mark
 * (class "reload-mark") at each moment the lab sent the signal, in the
 * server's colour. Standalone SVG 1.1. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "bench/lab_internal.h"

#define W 900
#define H 440
#define ML 80
#define MR 190
#define MT 50
#define MB 50


static const struct lab_reload_run *run_of(const struct lab *lab, const struct lab_server *s,
                                           int sig, int ci)
{
    const struct lab_reload_run *r = s->reload ? &s->reload[sig * lab->cfg->nconc + ci] : NULL;
    return r && r->p.ok && r->nslices ? r : NULL;
}

static void axes(FILE *f, double tmax, double ymax, double ystep)
{
    int pw = W - ML - MR, ph = H - MT - MB;
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
               "stroke=\"#444\"/>\n", ML, MT, pw, ph);
    for (double y = 0; y <= ymax + 1e-9; y += ystep) {
        double py = MT + ph - y / ymax * ph;
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                   "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.0f</text>\n",
                ML, py, ML + pw, py, ML - 6, py + 4, y);
    }
    double tstep = lab_svg_step(tmax, 10);
    for (double t = 0; t <= tmax + 1e-9; t += tstep) {
        double px = ML + t / tmax * pw;
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g</text>\n", px,
                MT + ph + 18, t);
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">seconds since measuring "
               "began</text>\n", ML + pw / 2, H - 10);
    fprintf(f, "<text transform=\"translate(18,%d) rotate(-90)\" text-anchor=\"middle\">"
               "requests per second</text>\n", MT + ph / 2);
}

static int chart(const struct lab *lab, int sig, int ci, const char *path)
{
    double tmax = 0, ymax = 0, slice = 0;
    for (int i = 0; i < lab->nservers; i++) {
        const struct lab_reload_run *r = run_of(lab, &lab->servers[i], sig, ci);
        if (r)
            slice = r->slice_s;
        for (int k = 0; r && k < r->nslices; k++)
            if (r->rps[k] > ymax)
                ymax = r->rps[k];
        if (r && r->nslices * r->slice_s > tmax)
            tmax = r->nslices * r->slice_s;
    }
    if (tmax <= 0)
        return 0;
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return -1;
    double ystep = lab_svg_step(ymax > 0 ? ymax : 1, 6);
    ymax = ceil((ymax > 0 ? ymax : 1) / ystep) * ystep;
    int pw = W - ML - MR, ph = H - MT - MB;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" "
               "height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n"
               "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
               "<text x=\"%d\" y=\"24\" font-size=\"16\">Requests per second across %d %s, "
               "c=%d (%.0f ms slices; marks: the signals)</text>\n",
            W, H, W, H, ML, lab->cfg->reloads, lab_signal_names[sig][0] == 'h' ? "HUPs" : "USR2s",
            lab->cfg->conc[ci], slice * 1000);
    axes(f, tmax, ymax, ystep);
    for (int i = 0, n = 0; i < lab->nservers; i++) {
        const struct lab_server *s = &lab->servers[i];
        const struct lab_reload_run *r = run_of(lab, s, sig, ci);
        if (!r)
            continue;
        const char *col = lab_svg_color(n);
        fprintf(f, "<polyline class=\"series\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" "
                   "points=\"", col);
        for (int k = 0; k < r->nslices; k++)
            fprintf(f, "%s%.1f,%.1f", k ? " " : "", ML + (k + 0.5) * r->slice_s / tmax * pw,
                    MT + ph - r->rps[k] / ymax * ph);
        fprintf(f, "\"/>\n");
        for (int k = 0; k < r->nmarks; k++) {
            double px = ML + r->marks[k].t_s / tmax * pw;
            fprintf(f, "<line class=\"reload-mark\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" "
                       "stroke=\"%s\" stroke-dasharray=\"4,3\" opacity=\"0.7\"><title>%s %s %d "
                       "at %.3f s: %llu errors</title></line>\n",
                    px, MT, px, MT + ph, col, s->label, lab_signal_names[sig], k + 1,
                    r->marks[k].t_s, (unsigned long long)r->marks[k].errors);
        }
        int ly = MT + 14 + 18 * n;
        fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" "
                   "stroke-width=\"3\"/><text x=\"%d\" y=\"%d\">%s (%llu errors)</text>\n",
                ML + pw + 12, ly - 4, ML + pw + 32, ly - 4, col, ML + pw + 38, ly, s->label,
                (unsigned long long)r->p.errors_total);
        n++;
    }
    fprintf(f, "</svg>\n");
    return lab_file_commit(f, tmp, path);
}

int lab_reload_svgs(const struct lab *lab)
{
    int rc = 0;
    for (int sig = 0; sig < LAB_NSIG; sig++)
        for (int ci = 0; lab->cfg->signals[sig] && ci < lab->cfg->nconc; ci++) {
            char path[900];
            snprintf(path, sizeof path, "%s/reload-c%d-%s.svg", lab->cfg->out_dir,
                     lab->cfg->conc[ci], lab_signal_names[sig]);
            rc |= chart(lab, sig, ci, path);
        }
    return rc;
}
