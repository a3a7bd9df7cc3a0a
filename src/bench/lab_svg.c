/* herd lab's charts: req/s (linear), p99 (log scale), errors and server
 * CPU per request (linear) against concurrency (log scale), one panel per
 * keep-alive mode, one polyline per server/model, standalone SVG 1.1 that
 * a browser opens as it is. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "bench/lab_internal.h"

#define PANEL_W 560
#define PANEL_H 420
#define MARGIN_L 78
#define MARGIN_R 22
#define MARGIN_T 58
#define MARGIN_B 56
#define LEGEND_W 200
#define TITLE_H 34


static int charted(const struct lab_server *s)
{
    return s->state == SRV_OK || s->state == SRV_FAILED || s->state == SRV_SKIPPED;
}

static const struct {
    const char *title, *axis, *unit;
} charts[CHART_N] = {
    [CHART_RPS] = {"Requests per second", "requests per second", " req/s"},
    [CHART_P99] = {"p99 latency", "p99 latency (log scale)", ""},
    [CHART_ERRORS] = {"Errors", "errors, % of requests tried", "% errors"},
    [CHART_CPU] = {"Server CPU per request", "server CPU per request (µs)", " µs"},
};

static double value(enum lab_chart which, const struct lab_point *p)
{
    double tried = (double)(p->requests + p->errors_total);
    switch (which) {
    case CHART_P99: return p->lat_us[LAT_P99];
    case CHART_ERRORS: return tried > 0 ? 100.0 * (double)p->errors_total / tried : NAN;
    case CHART_CPU: return p->requests ? 1e6 * (p->user_s + p->sys_s) / (double)p->requests : NAN;
    default: return p->rps;
    }
}

/* A point the chart can place: the log axis takes no zero; a linear one
 * does (no errors is the figure the errors chart is for). */
static int plotted(enum lab_chart which, const struct lab_point *p)
{
    double v = value(which, p);
    return p->ok && isfinite(v) && (which == CHART_P99 ? v > 0 : v >= 0);
}

static void fmt_rps(char *buf, size_t n, double v)
{
    if (v >= 1e6)
        snprintf(buf, n, "%gM", v / 1e6);
    else if (v >= 1e3)
        snprintf(buf, n, "%gk", v / 1e3);
    else
        snprintf(buf, n, "%g", v);
}

struct scale {
    double lo, hi;      /* in axis units (log10 for log axes) */
    int log;
    double p0, p1;      /* pixels for lo and hi */
};

static double map(const struct scale *s, double v)
{
    double x = s->log ? log10(v) : v;
    return s->p0 + (x - s->lo) / (s->hi - s->lo) * (s->p1 - s->p0);
}

static void panel(FILE *f, const struct lab *lab, enum lab_chart which, int ki, double ox,
                  double oy)
{
    const struct lab_config *cfg = lab->cfg;
    double x0 = ox + MARGIN_L, x1 = ox + PANEL_W - MARGIN_R;
    double y0 = oy + MARGIN_T, y1 = oy + PANEL_H - MARGIN_B;
    int ka = cfg->ka[ki];

    fprintf(f, "  <g class=\"panel\">\n");
    fprintf(f, "    <text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"14\" "
               "font-weight=\"bold\">%s</text>\n",
            (x0 + x1) / 2, oy + 24, ka ? "keep-alive on" : "keep-alive off (connection per request)");

    double vmin = INFINITY, vmax = 0;
    for (int i = 0; i < lab->nservers; i++) {
        const struct lab_server *s = &lab->servers[i];
        if (!charted(s))
            continue;
        for (int c = 0; c < cfg->nconc; c++) {
            const struct lab_point *p = lab_point(lab, s, ki, c);
            if (!plotted(which, p))
                continue;
            double v = value(which, p);
            vmin = v < vmin ? v : vmin;
            vmax = v > vmax ? v : vmax;
        }
    }

    /* x: concurrency, log scale, a little room on both sides */
    double cmin = cfg->conc[0], cmax = cfg->conc[cfg->nconc - 1];
    if (cmax <= cmin)
        cmin /= 2, cmax *= 2;
    double pad = (log10(cmax) - log10(cmin)) * 0.05;
    struct scale xs = {log10(cmin) - pad, log10(cmax) + pad, 1, x0, x1};
    struct scale ys;
    if (which != CHART_P99) {
        double top = vmax > 0 ? vmax * 1.08 : 1;
        double step = lab_svg_step(top, 5);
        ys = (struct scale){0, ceil(top / step) * step, 0, y1, y0};
    } else {
        double lo = vmax > 0 ? floor(log10(vmin)) : 0, hi = vmax > 0 ? ceil(log10(vmax)) : 1;
        if (hi <= lo)
            hi = lo + 1;
        ys = (struct scale){lo, hi, 1, y1, y0};
    }

    fprintf(f, "    <rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#ffffff\" "
               "stroke=\"#333333\" stroke-width=\"1\"/>\n",
            x0, y0, x1 - x0, y1 - y0);

    /* x ticks: every concurrency measured */
    for (int c = 0; c < cfg->nconc; c++) {
        double x = map(&xs, cfg->conc[c]);
        fprintf(f, "    <line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#dddddd\"/>\n",
                x, y0, x, y1);
        fprintf(f, "    <line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333333\"/>\n",
                x, y1, x, y1 + 5);
        fprintf(f, "    <text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%d</text>\n", x, y1 + 19,
                cfg->conc[c]);
    }
    fprintf(f, "    <text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">connections "
               "(log scale)</text>\n",
            (x0 + x1) / 2, y1 + 40);

    /* y ticks */
    char lbl[32];
    if (which != CHART_P99) {
        double step = lab_svg_step(ys.hi, 5);
        for (double v = 0; v <= ys.hi + step / 2; v += step) {
            double y = map(&ys, v);
            fmt_rps(lbl, sizeof lbl, v);
            fprintf(f, "    <line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                       "stroke=\"#dddddd\"/>\n", x0, y, x1, y);
            fprintf(f, "    <text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", x0 - 7,
                    y + 4, lbl);
        }
    } else {
        int decades = (int)(ys.hi - ys.lo);
        for (int d = (int)ys.lo; d <= (int)ys.hi; d++)
            for (int m = 1; m <= 5; m += m == 1 ? 1 : 3) { /* 1, 2, 5 */
                if (m > 1 && (decades > 3 || d == (int)ys.hi))
                    continue;
                double v = m * pow(10, d);
                double y = map(&ys, v);
                if (v < 1e3)
                    snprintf(lbl, sizeof lbl, "%g µs", v);
                else if (v < 1e6)
                    snprintf(lbl, sizeof lbl, "%g ms", v / 1e3);
                else
                    snprintf(lbl, sizeof lbl, "%g s", v / 1e6);
                fprintf(f, "    <line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                           "stroke=\"%s\"/>\n", x0, y, x1, y, m == 1 ? "#cccccc" : "#eeeeee");
                fprintf(f, "    <text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n",
                        x0 - 7, y + 4, lbl);
            }
    }
    fprintf(f, "    <text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" transform=\"rotate(-90 "
               "%.1f %.1f)\">%s</text>\n",
            ox + 16, (y0 + y1) / 2, ox + 16, (y0 + y1) / 2, charts[which].axis);

    if (vmin == INFINITY)
        fprintf(f, "    <text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#999999\">"
                   "no successful runs</text>\n",
                (x0 + x1) / 2, (y0 + y1) / 2);

    /* one polyline per server/model through its successful points */
    int color = 0;
    for (int i = 0; i < lab->nservers; i++) {
        const struct lab_server *s = &lab->servers[i];
        if (!charted(s))
            continue;
        const char *col = lab_svg_color(color++);
        int nok = 0;
        for (int c = 0; c < cfg->nconc; c++)
            nok += plotted(which, lab_point(lab, s, ki, c));
        if (nok) {
            fprintf(f, "    <polyline class=\"series\" fill=\"none\" stroke=\"%s\" "
                       "stroke-width=\"2\" points=\"", col);
            for (int c = 0, first = 1; c < cfg->nconc; c++) {
                const struct lab_point *p = lab_point(lab, s, ki, c);
                if (!plotted(which, p))
                    continue;
                fprintf(f, "%s%.1f,%.1f", first ? "" : " ", map(&xs, cfg->conc[c]),
                        map(&ys, value(which, p)));
                first = 0;
            }
            fprintf(f, "\"><title>");
            lab_svg_esc(f, s->label);
            fprintf(f, ", keep-alive %s</title></polyline>\n", ka ? "on" : "off");
        }
        for (int c = 0; c < cfg->nconc; c++) {
            const struct lab_point *p = lab_point(lab, s, ki, c);
            double x = map(&xs, cfg->conc[c]);
            if (plotted(which, p)) {
                char v[32];
                if (which == CHART_RPS)
                    lab_fmt_num(v, sizeof v, p->rps);
                else if (which == CHART_P99)
                    lab_fmt_us(v, sizeof v, p->lat_us[LAT_P99]);
                else
                    snprintf(v, sizeof v, "%.2f", value(which, p));
                /* Requests that never completed are errors, not latency: a
                 * hollow point says the figure leaves them out. */
                if (p->errors_total)
                    fprintf(f, "    <circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"#ffffff\" "
                               "stroke=\"%s\" stroke-width=\"2\"><title>",
                            x, map(&ys, value(which, p)), col);
                else
                    fprintf(f, "    <circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"><title>",
                            x, map(&ys, value(which, p)), col);
                lab_svg_esc(f, s->label);
                fprintf(f, ", c=%d: %s%s", cfg->conc[c], v, charts[which].unit);
                if (p->errors_total)
                    fprintf(f, ", %llu errors", (unsigned long long)p->errors_total);
                fprintf(f, "</title></circle>\n");
            } else if (p->done) {
                fprintf(f, "    <text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"%s\" "
                           "font-weight=\"bold\">×<title>", x, y1 - 4, col);
                lab_svg_esc(f, s->label);
                fprintf(f, ", c=%d failed: ", cfg->conc[c]);
                lab_svg_esc(f, p->reason);
                fprintf(f, "</title></text>\n");
            }
        }
    }
    fprintf(f, "  </g>\n");
}

int lab_write_svg(const struct lab *lab, enum lab_chart which, const char *path)
{
    const struct lab_config *cfg = lab->cfg;
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return -1;
    int nseries = 0;
    for (int i = 0; i < lab->nservers; i++)
        nseries += charted(&lab->servers[i]);
    int w = cfg->nka * PANEL_W + LEGEND_W;
    int legend_h = MARGIN_T + 20 * (nseries + 4);
    int h = TITLE_H + (PANEL_H > legend_h ? PANEL_H : legend_h) + 10;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" "
               "height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" "
               "font-size=\"12\">\n", w, h, w, h);
    fprintf(f, "  <title>herd lab: %s</title>\n", charts[which].title);
    fprintf(f, "  <rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n", w, h);
    /* Centred on the whole canvas: the title (with its date) is wider than
     * one panel, and centred over the panels alone it ran off the left. */
    fprintf(f, "  <text x=\"%d\" y=\"22\" text-anchor=\"middle\" font-size=\"16\" "
               "font-weight=\"bold\">",
            w / 2);
    fprintf(f, "%s against connections, ", charts[which].title);
    lab_svg_esc(f, lab->man.started);
    fprintf(f, "</text>\n");
    for (int ki = 0; ki < cfg->nka; ki++)
        panel(f, lab, which, ki, ki * PANEL_W, TITLE_H);

    double lx = cfg->nka * PANEL_W + 10, ly = TITLE_H + MARGIN_T;
    fprintf(f, "  <g class=\"legend\">\n    <text x=\"%.1f\" y=\"%.1f\" "
               "font-weight=\"bold\">server/model</text>\n", lx, ly);
    int color = 0;
    for (int i = 0; i < lab->nservers; i++) {
        const struct lab_server *s = &lab->servers[i];
        if (!charted(s))
            continue;
        double y = ly + 20 * (color + 1);
        const char *col = lab_svg_color(color++);
        fprintf(f, "    <line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                   "stroke-width=\"3\"/>\n", lx, y - 4, lx + 24, y - 4, col);
        fprintf(f, "    <text x=\"%.1f\" y=\"%.1f\">", lx + 30, y);
        lab_svg_esc(f, s->label);
        if (s->state == SRV_FAILED)
            fputs(" (failed)", f);
        fprintf(f, "</text>\n");
    }
    double ny = ly + 20 * (color + 2);
    fprintf(f, "    <circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"#ffffff\" stroke=\"#333333\" "
               "stroke-width=\"2\"/>\n", lx + 12, ny - 4);
    fprintf(f, "    <text x=\"%.1f\" y=\"%.1f\">run with errors</text>\n", lx + 30, ny);
    fprintf(f, "    <text x=\"%.1f\" y=\"%.1f\" font-weight=\"bold\" fill=\"#d62728\">×</text>\n",
            lx + 8, ny + 20);
    fprintf(f, "    <text x=\"%.1f\" y=\"%.1f\">failed run</text>\n", lx + 30, ny + 20);
    fprintf(f, "  </g>\n</svg>\n");
    return lab_file_commit(f, tmp, path);
}
