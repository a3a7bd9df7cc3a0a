/* herd lab's balance.svg: one group of bars per multi-worker run, a bar
 * per worker with its share of the connections accepted, and a dashed
 * line at the even share. Standalone SVG 1.1. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "bench/lab_internal.h"

#define BAR_W 22
#define GAP 36
#define LEFT 64
#define TOP 56
#define PLOT_H 300
#define BOTTOM 70

static void group(FILE *f, const struct lab_balance *b, double x, double y0)
{
    uint64_t total = 0;
    for (int w = 0; w < b->workers; w++)
        total += b->accepted[w];
    double gw = b->workers * BAR_W;
    if (b->ok && total) {
        double even = y0 - PLOT_H / (double)b->workers;
        fprintf(f, "  <line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333333\" "
                   "stroke-dasharray=\"4 3\"><title>even share</title></line>\n",
                x - 4, even, x + gw + 4, even);
        for (int w = 0; w < b->workers; w++) {
            double share = (double)b->accepted[w] / (double)total, h = share * PLOT_H;
            fprintf(f, "  <rect class=\"bar\" x=\"%.1f\" y=\"%.1f\" width=\"%d\" height=\"%.1f\" "
                       "fill=\"#1f77b4\" stroke=\"#ffffff\"><title>",
                    x + w * BAR_W, y0 - h, BAR_W, h);
            lab_svg_esc(f, b->label);
            fprintf(f, ", worker %d: %llu connections (%.1f%%)</title></rect>\n", w,
                    (unsigned long long)b->accepted[w], 100 * share);
        }
    } else {
        fprintf(f, "  <text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#999999\">"
                   "failed<title>", x + gw / 2, y0 - PLOT_H / 2.0);
        lab_svg_esc(f, b->ok ? "no connections" : b->reason);
        fprintf(f, "</title></text>\n");
    }
    fprintf(f, "  <text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", x + gw / 2, y0 + 20);
    lab_svg_esc(f, b->label);
    fprintf(f, "</text>\n");
}

int lab_write_balance_svg(const struct lab *lab, const char *path)
{
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return -1;
    int width = LEFT + 20;
    for (int i = 0; i < lab->nbalance; i++)
        width += lab->balance[i].workers * BAR_W + GAP;
    if (width < 480)
        width = 480;
    int height = TOP + PLOT_H + BOTTOM;
    double y0 = TOP + PLOT_H;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" "
               "height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" "
               "font-size=\"12\">\n  <title>herd lab: accept balance</title>\n"
               "  <rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n",
            width, height, width, height, width, height);
    /* two lines: one would be wider than a chart of a few runs */
    fprintf(f, "  <text x=\"%d\" y=\"22\" text-anchor=\"middle\" font-size=\"16\" "
               "font-weight=\"bold\">Connections accepted per worker</text>\n"
               "  <text x=\"%d\" y=\"40\" text-anchor=\"middle\">%d workers, a connection "
               "per request; dashed: the even share</text>\n",
            width / 2, width / 2, lab->cfg->balance_workers);
    for (int pct = 0; pct <= 100; pct += 25) {
        double y = y0 - PLOT_H * pct / 100.0;
        fprintf(f, "  <line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#dddddd\"/>\n"
                   "  <text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%d%%</text>\n",
                LEFT - 6, y, width - 10, y, LEFT - 10, y + 4, pct);
    }
    if (!lab->nbalance)
        fprintf(f, "  <text x=\"%d\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#999999\">no "
                   "multi-worker runs (prefork, reuseport or dispatch, --balance-workers "
                   "2 or more)</text>\n", width / 2, y0 - PLOT_H / 2.0);
    double x = LEFT + GAP / 2.0;
    for (int i = 0; i < lab->nbalance; i++) {
        group(f, &lab->balance[i], x, y0);
        x += lab->balance[i].workers * BAR_W + GAP;
    }
    fprintf(f, "</svg>\n");
    return lab_file_commit(f, tmp, path);
}
