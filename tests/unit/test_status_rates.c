/* herd status --watch: the counters read from a status JSON sample.
 * src/cmd is not linked into the tests, so the file is included. */
#include "unit.h"

#include "../../src/cmd/status_rates.c"

static const char *bad_key(const char *counters, const char *classes)
{
    char json[512];
    snprintf(json, sizeof json, "{\"master_pid\":1,%s,\"responses\":%s,\"slots\":[]}",
             counters, classes);
    struct status_sample s;
    const char *bad = "unset";
    return status_sample_parse(json, 0, &s, &bad) == 0 ? NULL : bad;
}

#define CLASSES "{\"1xx\":0,\"2xx\":5,\"3xx\":0,\"4xx\":1,\"5xx\":0}"

TEST(good_sample)
{
    struct status_sample s;
    const char *bad = "unset";
    CHECK_EQ_INT(status_sample_parse("{\"master_pid\":1,\"requests\":18446744073709551615,"
                                     "\"bytes_in\":0,\"bytes_out\":2,\"responses\":" CLASSES
                                     ",\"slots\":[{\"requests\":3}]}", 1.5, &s, &bad), 0);
    CHECK(bad == NULL);
    CHECK_EQ_U64(s.requests, 18446744073709551615ull);
    CHECK_EQ_U64(s.bytes_out, 2);
    CHECK_EQ_U64(s.cls[2], 5);
    CHECK_EQ_U64(s.cls[4], 1);
}

TEST(bad_samples_name_their_key)
{
    const char *ok = "\"requests\":5,\"bytes_in\":1,\"bytes_out\":2";
    CHECK(bad_key(ok, CLASSES) == NULL);
    CHECK(!strcmp(bad_key("\"requests\":-5,\"bytes_in\":1,\"bytes_out\":2", CLASSES),
                  "requests"));
    CHECK(!strcmp(bad_key("\"requests\":+5,\"bytes_in\":1,\"bytes_out\":2", CLASSES),
                  "requests"));
    CHECK(!strcmp(bad_key("\"requests\": 5,\"bytes_in\":1,\"bytes_out\":2", CLASSES),
                  "requests"));
    CHECK(!strcmp(bad_key("\"requests\":5,\"bytes_in\":18446744073709551616,\"bytes_out\":2",
                          CLASSES), "bytes_in"));
    CHECK(!strcmp(bad_key("\"requests\":5,\"bytes_in\":1.5,\"bytes_out\":2", CLASSES),
                  "bytes_in"));
    CHECK(!strcmp(bad_key("\"requests\":5,\"bytes_in\":1,\"bytes_out\":\"x\"", CLASSES),
                  "bytes_out"));
    CHECK(!strcmp(bad_key("\"requests\":5,\"bytes_in\":1", CLASSES), "bytes_out"));
    CHECK(!strcmp(bad_key(ok, "{\"1xx\":0,\"2xx\":5,\"3xx\":0,\"4xx\":-1,\"5xx\":0}"), "4xx"));
    CHECK(!strcmp(bad_key(ok, "{}"), "1xx"));
    CHECK(!strcmp(bad_key(ok, "[]"), "responses"));
}
