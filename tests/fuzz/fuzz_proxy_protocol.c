/* libFuzzer target for pp_parse: never reads past len, and its
 * answer is stable: a header accepted from a buffer is accepted, with the
 * same length, from any longer buffer, and every shorter prefix of it asks
 * for more bytes (a header may arrive in pieces). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http/pp.h"

#define ENSURE(c)                 \
    do {                          \
        if (!(c))                 \
            __builtin_trap();     \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* an exact-size copy, so ASan sees any read past the end */
    char *buf = malloc(size ? size : 1);
    memcpy(buf, data, size);
    struct pp_info info;
    int n = pp_parse(buf, size, &info);
    ENSURE(n == -1 || n == -2 || (n > 0 && (size_t)n <= size));
    if (n > 0) {
        ENSURE((size_t)n <= PP_V2_MAX);
        for (size_t k = 0; k < (size_t)n; k++) {
            int m = pp_parse(buf, k, &info);
            ENSURE(m == -2);
        }
    }
    free(buf);
    return 0;
}
