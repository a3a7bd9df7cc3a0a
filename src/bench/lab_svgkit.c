/* What herd lab's charts share: the series colours, round axis steps,
 * XML escaping of labels, and writing a file in place only when whole. */
#include <math.h>
#include <stdio.h>
#include <unistd.h>

#include "bench/lab_internal.h"

static const char *const palette[] = {
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
};

const char *lab_svg_color(int i)
{
    int n = (int)(sizeof palette / sizeof palette[0]);
    return palette[(i % n + n) % n];
}

double lab_svg_step(double max, int n)
{
    double raw = max / n, mag = pow(10, floor(log10(raw)));
    double r = raw / mag;
    return (r <= 1 ? 1 : r <= 2 ? 2 : r <= 5 ? 5 : 10) * mag;
}

void lab_svg_esc(FILE *f, const char *s)
{
    for (; *s; s++)
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
}

int lab_file_commit(FILE *f, const char *tmp, const char *path)
{
    int bad = ferror(f);
    if (fclose(f) != 0 || bad || rename(tmp, path) < 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}
