/* A small JSON reader for the files herd itself writes (load results read
 * back by `herd load --merge`). It builds a tree with malloc: it is for
 * reading a few files, not for a hot path. Integers that fit in 64 bits
 * keep every digit (counts and nanosecond sums exceed a double's 53 bits). */
#ifndef HERD_BENCH_JSON_H
#define HERD_BENCH_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum json_type { JSON_NULL, JSON_BOOL, JSON_NUM, JSON_STR, JSON_ARR, JSON_OBJ };

struct json {
    enum json_type type;
    int is_u64;           /* a number written as a non-negative integer that fits */
    uint64_t u64;
    double num;           /* every number, also booleans (0 or 1) */
    char *str;            /* JSON_STR, NUL-terminated */
    char *key;            /* the member name, inside an object */
    struct json *child;   /* first element or member */
    struct json *next;    /* next sibling */
};

/* Parses text[0..len) as one JSON value (whitespace around it allowed).
 * Returns the tree, or NULL with "line N: reason" in err. */
struct json *json_parse(const char *text, size_t len, char *err, size_t errlen);
void json_free(struct json *v);

/* The member named key of an object, or NULL. */
const struct json *json_get(const struct json *obj, const char *key);
/* A number member as uint64 (rounding a non-integer down) or double;
 * returns -1 when it is missing or not a non-negative number. */
int json_get_u64(const struct json *obj, const char *key, uint64_t *out);
int json_get_double(const struct json *obj, const char *key, double *out);

/* Writes s as a JSON string literal, with quotes. */
void json_write_str(FILE *f, const char *s);

#endif
