#include "http/mime.h"

#include <string.h>
#include <strings.h>

static const struct {
    const char *ext;
    const char *type;
} table[] = {
    {"html", "text/html; charset=utf-8"},
    {"htm", "text/html; charset=utf-8"},
    {"css", "text/css; charset=utf-8"},
    {"js", "text/javascript; charset=utf-8"},
    {"mjs", "text/javascript; charset=utf-8"},
    {"txt", "text/plain; charset=utf-8"},
    {"md", "text/markdown; charset=utf-8"},
    {"csv", "text/csv; charset=utf-8"},
    {"xml", "text/xml; charset=utf-8"},
    {"json", "application/json"},
    {"map", "application/json"},
    {"webmanifest", "application/manifest+json"},
    {"png", "image/png"},
    {"jpg", "image/jpeg"},
    {"jpeg", "image/jpeg"},
    {"gif", "image/gif"},
    {"svg", "image/svg+xml"},
    {"ico", "image/x-icon"},
    {"webp", "image/webp"},
    {"avif", "image/avif"},
    {"woff", "font/woff"},
    {"woff2", "font/woff2"},
    {"ttf", "font/ttf"},
    {"otf", "font/otf"},
    {"pdf", "application/pdf"},
    {"wasm", "application/wasm"},
    {"zip", "application/zip"},
    {"gz", "application/gzip"},
    {"tar", "application/x-tar"},
    {"mp4", "video/mp4"},
    {"webm", "video/webm"},
    {"mp3", "audio/mpeg"},
    {"ogg", "audio/ogg"},
    {"wav", "audio/wav"},
};

const char *mime_type(const char *path, size_t len)
{
    size_t i = len;
    while (i > 0 && path[i - 1] != '.' && path[i - 1] != '/')
        i--;
    if (i == 0 || path[i - 1] != '.')
        return "application/octet-stream";
    const char *ext = path + i;
    size_t n = len - i;
    for (size_t k = 0; k < sizeof table / sizeof table[0]; k++)
        if (strlen(table[k].ext) == n && strncasecmp(table[k].ext, ext, n) == 0)
            return table[k].type;
    return "application/octet-stream";
}
