#include "bench/flame.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_DEPTH 128
#define FRAME_MAX 160
#define WIDTH 1200
#define ROW_H 16
#define TOP 40

struct stacks {
    char **v;          /* "root;...;leaf", then sorted */
    size_t n, cap;
};

static int push(struct stacks *s, char *line)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 1024;
        char **v = realloc(s->v, cap * sizeof *v);
        if (!v)
            return -1;
        s->v = v, s->cap = cap;
    }
    s->v[s->n++] = line;
    return 0;
}

/* "\t ffff81 name+0x1b5 (dso)" -> "name" (or "[dso]" when perf knew none). */
static void frame_name(const char *line, char *out, size_t n)
{
    while (*line == ' ' || *line == '\t')
        line++;
    line += strcspn(line, " ");                     /* the address */
    while (*line == ' ')
        line++;
    size_t len = strcspn(line, "\n");
    const char *dso = memchr(line, '(', len);
    size_t nlen = dso ? (size_t)(dso - line) : len;
    while (nlen && line[nlen - 1] == ' ')
        nlen--;
    const char *plus = NULL;
    for (size_t i = 0; i < nlen; i++)
        if (line[i] == '+' && i + 2 < nlen && line[i + 1] == '0' && line[i + 2] == 'x')
            plus = line + i;
    if (plus)
        nlen = (size_t)(plus - line);
    if (nlen == 0 || (nlen == 9 && !memcmp(line, "[unknown]", 9))) {
        size_t dl = dso ? strcspn(dso + 1, ")\n") : 0;
        const char *slash = dso ? memrchr(dso + 1, '/', dl) : NULL;
        const char *base = slash ? slash + 1 : dso ? dso + 1 : "";
        int blen = (int)(dso ? dl - (size_t)(base - dso - 1) : 0);
        snprintf(out, n, blen && base[0] == '[' ? "%.*s" : "[%.*s]", blen, base);
        return;
    }
    snprintf(out, n, "%.*s", (int)nlen, line);
    for (char *p = out; *p; p++)
        if (*p == ';')
            *p = ':';                               /* the fold's separator */
}

/* One sample's frames (leaf first, as perf prints them) -> "comm;root;...;leaf". */
static char *fold(const char *comm, char frames[][FRAME_MAX], int depth)
{
    size_t len = strlen(comm) + 1;
    for (int i = 0; i < depth; i++)
        len += strlen(frames[i]) + 1;
    char *s = malloc(len), *p = s;
    if (!s)
        return NULL;
    p += sprintf(p, "%s", comm);
    for (int i = depth - 1; i >= 0; i--)
        p += sprintf(p, ";%s", frames[i]);
    return s;
}

static int read_stacks(FILE *f, struct stacks *st)
{
    static char frames[MAX_DEPTH][FRAME_MAX];
    char line[4096], comm[64] = "";
    int depth = 0, in_sample = 0;
    for (;;) {
        char *got = fgets(line, sizeof line, f);
        if (!got || line[0] == '\n') {
            if (in_sample) {
                char *s = fold(comm, frames, depth);
                if (!s || push(st, s) < 0)
                    return -1;
            }
            in_sample = 0, depth = 0;
            if (!got)
                return 0;
            continue;
        }
        if (line[0] != ' ' && line[0] != '\t') {
            /* "comm pid time: period event:"; anything else (perf's own
             * warnings share the file) ends the sample and is skipped */
            size_t k = strcspn(line, " \t"), end = strcspn(line, "\n");
            while (end && (line[end - 1] == ' ' || line[end - 1] == '\t'))
                end--;
            int fields = 0;
            for (size_t i = 0; i < end; i++)
                fields += (i == 0 || line[i - 1] == ' ') && line[i] != ' ';
            in_sample = end && line[end - 1] == ':' && fields >= 4;
            snprintf(comm, sizeof comm, "%.*s", (int)(k < 63 ? k : 63), line);
            depth = 0;
        } else if (in_sample && depth < MAX_DEPTH) {
            frame_name(line, frames[depth++], FRAME_MAX);
        }
    }
}

static int cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void esc(FILE *f, const char *s, size_t n)
{
    for (size_t i = 0; i < n && s[i]; i++)
        switch (s[i]) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(s[i], f);
        }
}

struct open_frame {
    const char *name;
    size_t len;
    long start;       /* samples before it */
};

static void box(FILE *f, const struct open_frame *o, int depth, long end, long total)
{
    double x = 10 + (double)o->start * (WIDTH - 20) / (double)total;
    double w = (double)(end - o->start) * (WIDTH - 20) / (double)total;
    double y = TOP + (double)depth * ROW_H;
    unsigned h = 0;
    for (size_t i = 0; i < o->len; i++)
        h = h * 31 + (unsigned char)o->name[i];
    fprintf(f, "<g><title>");
    esc(f, o->name, o->len);
    fprintf(f, " (%ld samples, %.2f%%)</title><rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" "
               "height=\"%d\" fill=\"rgb(%u,%u,%u)\" rx=\"2\"/>",
            end - o->start, 100.0 * (double)(end - o->start) / (double)total, x, y, w, ROW_H - 1,
            205 + h % 50, 80 + (h >> 8) % 130, 40 + (h >> 16) % 40);
    int chars = (int)(w / 7);
    if (chars >= 3) {
        fprintf(f, "<text x=\"%.2f\" y=\"%.1f\">", x + 3, y + ROW_H - 4);
        esc(f, o->name, o->len < (size_t)chars ? o->len : (size_t)chars - 2);
        if (o->len > (size_t)chars)
            fputs("..", f);
        fprintf(f, "</text>");
    }
    fprintf(f, "</g>\n");
}

/* The frames of each distinct stack, in sorted order: a frame's box spans
 * the consecutive stacks that share the path up to it (flamegraph's merge). */
static void draw(FILE *f, const struct stacks *st, long total)
{
    struct open_frame open[MAX_DEPTH + 1];
    int nopen = 0;
    long x = 0;
    for (size_t i = 0; i <= st->n; i++) {
        const char *s = i < st->n ? st->v[i] : "";
        int d = 0;
        const char *p = s;
        /* keep the open frames this stack shares */
        while (d < nopen && *p) {
            size_t len = strcspn(p, ";");
            if (len != open[d].len || memcmp(p, open[d].name, len))
                break;
            p += len + (p[len] == ';');
            d++;
        }
        while (nopen > d) {
            nopen--;
            box(f, &open[nopen], nopen, x, total);
        }
        if (i == st->n)
            break;
        while (*p && nopen < MAX_DEPTH) {
            size_t len = strcspn(p, ";");
            open[nopen++] = (struct open_frame){p, len, x};
            p += len + (p[len] == ';');
        }
        x++;
    }
}

long flame_svg(const char *script_path, const char *svg_path, const char *title, char *err,
               size_t errlen)
{
    FILE *in = fopen(script_path, "r");
    if (!in) {
        snprintf(err, errlen, "cannot read %s: %s", script_path, strerror(errno));
        return -1;
    }
    struct stacks st = {0};
    int rc = read_stacks(in, &st);
    fclose(in);
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp", svg_path);
    FILE *f = rc < 0 ? NULL : fopen(tmp, "w");
    if (!f) {
        snprintf(err, errlen, rc < 0 ? "out of memory" : "cannot write %s", svg_path);
        for (size_t i = 0; i < st.n; i++)
            free(st.v[i]);
        free(st.v);
        return -1;
    }
    qsort(st.v, st.n, sizeof *st.v, cmp);
    int depth = 0;
    for (size_t i = 0; i < st.n; i++) {
        int d = 1;
        for (const char *p = st.v[i]; *p; p++)
            d += *p == ';';
        depth = d > depth ? d : depth;
    }
    depth = depth < MAX_DEPTH ? depth : MAX_DEPTH;
    int height = TOP + (depth + 1) * ROW_H + 20;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" "
               "height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"monospace\" "
               "font-size=\"11\">\n<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" "
               "fill=\"#f8f8f0\"/>\n<text x=\"%d\" y=\"24\" text-anchor=\"middle\" "
               "font-size=\"15\" font-family=\"sans-serif\">",
            WIDTH, height, WIDTH, height, WIDTH, height, WIDTH / 2);
    esc(f, title, strlen(title));
    fprintf(f, " (%zu samples; root at the top, a box's width is its share)</text>\n", st.n);
    if (st.n)
        draw(f, &st, (long)st.n);
    fprintf(f, "</svg>\n");
    for (size_t i = 0; i < st.n; i++)
        free(st.v[i]);
    free(st.v);
    int bad = ferror(f);
    if (fclose(f) != 0 || bad || rename(tmp, svg_path) < 0) {
        unlink(tmp);
        snprintf(err, errlen, "cannot write %s", svg_path);
        return -1;
    }
    return (long)st.n;
}
