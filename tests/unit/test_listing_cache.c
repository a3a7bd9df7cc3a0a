/* fc_listing_recent / fc_listing_keep (http/filecache.c): a listing built
 * again the same is shared, one built within the second is served again,
 * a changed one replaces the kept copy, and at most a few are kept. */
#include "unit.h"

#include <stdlib.h>

#include "http/filecache.h"

static struct fc_entry *page(const char *text)
{
    return fc_memory_entry(strdup(text), strlen(text));
}

TEST(same_bytes_share_one_copy)
{
    struct filecache_limits lim = {.max_entries = 16};
    struct filecache *fc = fc_create("/", &lim);
    if (!CHECK(fc != NULL))
        return;
    CHECK(fc_listing_recent(fc, "/d/", 3, 100) == NULL);
    struct fc_entry *a = fc_listing_keep(fc, "/d/", 3, page("<listing 1>"), 100);
    CHECK_EQ_INT(a->refs, 2); /* the caller's and the cache's */
    struct fc_entry *again = fc_listing_recent(fc, "/d/", 3, 100);
    CHECK(again == a);
    CHECK(fc_listing_recent(fc, "/d/", 3, 101) == NULL); /* a second later: build it */
    struct fc_entry *same = fc_listing_keep(fc, "/d/", 3, page("<listing 1>"), 101);
    CHECK(same == a); /* the rebuild was the same: the copy already held */
    CHECK_EQ_INT(a->refs, 4);
    struct fc_entry *changed = fc_listing_keep(fc, "/d/", 3, page("<listing 2>"), 102);
    CHECK(changed != a && changed->size == 11);
    CHECK_EQ_INT(a->refs, 3); /* no longer kept; its senders still hold it */
    fc_release(a), fc_release(again), fc_release(same), fc_release(changed);
    fc_destroy(fc);
}

TEST(a_few_are_kept_the_oldest_goes)
{
    struct filecache_limits lim = {.max_entries = 16};
    struct filecache *fc = fc_create("/", &lim);
    if (!CHECK(fc != NULL))
        return;
    char key[16];
    for (int i = 0; i < 6; i++) {
        snprintf(key, sizeof key, "/%d/", i);
        fc_release(fc_listing_keep(fc, key, 3, page(key), 200 + i));
    }
    /* four kept: /2/ to /5/ */
    CHECK(fc_listing_recent(fc, "/0/", 3, 200) == NULL);
    CHECK(fc_listing_recent(fc, "/1/", 3, 201) == NULL);
    struct fc_entry *e = fc_listing_recent(fc, "/5/", 3, 205);
    CHECK(e != NULL && e->size == 3 && memcmp(e->data, "/5/", 3) == 0);
    if (e)
        fc_release(e);
    fc_destroy(fc); /* frees what it keeps (ASan: no leak) */
}
