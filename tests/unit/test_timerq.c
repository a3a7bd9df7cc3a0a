/* The FIFO timeout queue: order, re-arming, unlinking, expiry. */
#include "unit.h"

#include "core/timerq.h"

struct owner {
    int id;
    struct tq_node node;
};

static int id_of(struct tq_node *n)
{
    return n ? container_of(n, struct owner, node)->id : -1;
}

static void owners_init(struct owner *o, int n)
{
    memset(o, 0, sizeof *o * (size_t)n);
    for (int i = 0; i < n; i++)
        o[i].id = i;
}

TEST(empty)
{
    struct timerq q;
    tq_init(&q, 100);
    CHECK_EQ_INT(tq_next_deadline(&q), -1);
    CHECK(tq_pop_expired(&q, 0) == NULL);
    CHECK(tq_pop_expired(&q, INT64_MAX) == NULL);
}

TEST(fifo_order_and_deadlines)
{
    struct timerq q;
    struct owner o[3];
    owners_init(o, 3);
    tq_init(&q, 100);
    CHECK(!tq_linked(&o[0].node));
    tq_arm(&q, &o[0].node, 0);
    tq_arm(&q, &o[1].node, 10);
    tq_arm(&q, &o[2].node, 20);
    CHECK(tq_linked(&o[0].node) && tq_linked(&o[1].node) && tq_linked(&o[2].node));
    CHECK_EQ_INT(o[0].node.deadline_ms, 100);
    CHECK_EQ_INT(o[1].node.deadline_ms, 110);
    CHECK_EQ_INT(o[2].node.deadline_ms, 120);
    CHECK_EQ_INT(tq_next_deadline(&q), 100);

    /* nothing is due before its deadline */
    CHECK(tq_pop_expired(&q, 99) == NULL);
    CHECK_EQ_INT(tq_next_deadline(&q), 100);
    /* due at its deadline exactly, one at a time */
    CHECK_EQ_INT(id_of(tq_pop_expired(&q, 100)), 0);
    CHECK(!tq_linked(&o[0].node));
    CHECK(tq_pop_expired(&q, 100) == NULL);
    CHECK_EQ_INT(tq_next_deadline(&q), 110);
    /* all due: oldest first */
    CHECK_EQ_INT(id_of(tq_pop_expired(&q, 1000)), 1);
    CHECK_EQ_INT(tq_next_deadline(&q), 120);
    CHECK_EQ_INT(id_of(tq_pop_expired(&q, 1000)), 2);
    CHECK(tq_pop_expired(&q, 1000) == NULL);
    CHECK_EQ_INT(tq_next_deadline(&q), -1);
}

TEST(rearm_moves_to_tail)
{
    struct timerq q;
    struct owner o[3];
    owners_init(o, 3);
    tq_init(&q, 100);
    tq_arm(&q, &o[0].node, 0);
    tq_arm(&q, &o[1].node, 10);
    tq_arm(&q, &o[2].node, 20);
    tq_arm(&q, &o[0].node, 50); /* activity on 0 */
    CHECK_EQ_INT(o[0].node.deadline_ms, 150);
    CHECK_EQ_INT(tq_next_deadline(&q), 110);
    CHECK(tq_pop_expired(&q, 109) == NULL);
    CHECK_EQ_INT(id_of(tq_pop_expired(&q, 149)), 1);
    CHECK_EQ_INT(id_of(tq_pop_expired(&q, 149)), 2);
    CHECK(tq_pop_expired(&q, 149) == NULL); /* 0 is not due yet */
    CHECK_EQ_INT(tq_next_deadline(&q), 150);
    CHECK_EQ_INT(id_of(tq_pop_expired(&q, 150)), 0);
    CHECK(tq_pop_expired(&q, 1000) == NULL);

    /* re-arming the tail, or the only node, keeps the list sound */
    tq_arm(&q, &o[1].node, 0);
    tq_arm(&q, &o[1].node, 5);
    tq_arm(&q, &o[1].node, 7);
    CHECK_EQ_INT(tq_next_deadline(&q), 107);
    CHECK_EQ_INT(id_of(tq_pop_expired(&q, 107)), 1);
    CHECK(tq_pop_expired(&q, 1000) == NULL);
}

TEST(unlink)
{
    struct timerq q;
    struct owner o[4];
    owners_init(o, 4);
    tq_init(&q, 10);
    for (int i = 0; i < 4; i++)
        tq_arm(&q, &o[i].node, i);
    tq_unlink(&o[1].node); /* middle */
    CHECK(!tq_linked(&o[1].node));
    tq_unlink(&o[1].node); /* twice: nothing */
    tq_unlink(&o[0].node); /* head */
    CHECK_EQ_INT(tq_next_deadline(&q), 12);
    tq_unlink(&o[3].node); /* tail */
    CHECK_EQ_INT(id_of(tq_pop_expired(&q, 1000)), 2);
    CHECK(tq_pop_expired(&q, 1000) == NULL);
    CHECK_EQ_INT(tq_next_deadline(&q), -1);
    /* a node never armed */
    struct tq_node fresh = {0};
    tq_unlink(&fresh);
    CHECK(!tq_linked(&fresh));
    /* unlinked nodes can be armed again */
    tq_arm(&q, &o[1].node, 100);
    CHECK_EQ_INT(id_of(tq_pop_expired(&q, 110)), 1);
}

TEST(move_between_queues)
{
    struct timerq slow, fast;
    struct owner o[2];
    owners_init(o, 2);
    tq_init(&slow, 1000);
    tq_init(&fast, 10);
    tq_arm(&slow, &o[0].node, 0);
    tq_arm(&slow, &o[1].node, 0);
    tq_arm(&fast, &o[0].node, 5); /* leaves slow */
    CHECK_EQ_INT(o[0].node.deadline_ms, 15);
    CHECK_EQ_INT(tq_next_deadline(&fast), 15);
    CHECK_EQ_INT(tq_next_deadline(&slow), 1000);
    CHECK_EQ_INT(id_of(tq_pop_expired(&slow, 5000)), 1);
    CHECK(tq_pop_expired(&slow, 5000) == NULL);
    CHECK_EQ_INT(id_of(tq_pop_expired(&fast, 15)), 0);
    CHECK(tq_pop_expired(&fast, 5000) == NULL);
}

TEST(owner_freed_after_pop)
{
    /* the expiry loop frees each owner as it goes (ASan would see a use) */
    struct timerq q;
    tq_init(&q, 1);
    for (int i = 0; i < 100; i++) {
        struct owner *o = calloc(1, sizeof *o);
        o->id = i;
        tq_arm(&q, &o->node, i);
    }
    int n = 0, last = -1, in_order = 1;
    struct tq_node *t;
    while ((t = tq_pop_expired(&q, 1000)) != NULL) {
        struct owner *o = container_of(t, struct owner, node);
        in_order &= o->id == last + 1;
        last = o->id;
        free(o);
        n++;
    }
    CHECK_EQ_INT(n, 100);
    CHECK(in_order);
}

TEST(random_rearms_stay_sorted)
{
    enum { N = 500 };
    static struct owner o[N];
    owners_init(o, N);
    struct timerq q;
    tq_init(&q, 1000);
    unsigned seed = 12345;
    int64_t now = 0;
    for (int step = 0; step < 20000; step++) {
        seed = seed * 1103515245u + 12345u;
        int i = (int)((seed >> 8) % N);
        now += (seed >> 4) % 3;
        if ((seed >> 20) % 8 == 0)
            tq_unlink(&o[i].node);
        else
            tq_arm(&q, &o[i].node, now);
    }
    int linked = 0;
    for (int i = 0; i < N; i++)
        linked += tq_linked(&o[i].node);
    /* popping everything: every linked node once, deadlines non-decreasing */
    int popped = 0, sorted = 1;
    int64_t prev = INT64_MIN;
    struct tq_node *t;
    while ((t = tq_pop_expired(&q, INT64_MAX)) != NULL) {
        sorted &= t->deadline_ms >= prev;
        prev = t->deadline_ms;
        popped++;
        if (popped > N)
            break;
    }
    CHECK(linked > 0);
    CHECK_EQ_INT(popped, linked);
    CHECK(sorted);
    for (int i = 0; i < N; i++)
        if (!CHECK(!tq_linked(&o[i].node)))
            break;
}

TEST(arm_at_keeps_order)
{
    struct timerq q;
    struct owner o[5];
    owners_init(o, 5);
    tq_init(&q, 100);
    tq_arm(&q, &o[0].node, 0);    /* 100 */
    tq_arm(&q, &o[1].node, 20);   /* 120 */
    tq_arm(&q, &o[2].node, 40);   /* 140 */
    /* an extended deadline between others goes between them */
    tq_arm_at(&q, &o[3].node, 130);
    CHECK_EQ_INT(o[3].node.deadline_ms, 130);
    /* one later than all goes to the tail; an earliest one to the head */
    tq_arm_at(&q, &o[4].node, 140);
    tq_arm_at(&q, &o[0].node, 50);
    CHECK_EQ_INT(tq_next_deadline(&q), 50);
    int want[] = {0, 1, 3, 2, 4};
    for (int i = 0; i < 5; i++)
        CHECK_EQ_INT(id_of(tq_pop_expired(&q, 1000)), want[i]);
    CHECK(tq_pop_expired(&q, 1000) == NULL);
    /* a plain arm after an arm_at still appends in order */
    tq_arm_at(&q, &o[1].node, 150);
    tq_arm(&q, &o[2].node, 60); /* 160 */
    CHECK(tq_pop_expired(&q, 149) == NULL);
    CHECK_EQ_INT(id_of(tq_pop_expired(&q, 1000)), 1);
    CHECK_EQ_INT(id_of(tq_pop_expired(&q, 1000)), 2);
}

TEST(arm_at_random_stays_sorted)
{
    enum { N = 64 };
    struct timerq q;
    struct owner o[N];
    owners_init(o, N);
    tq_init(&q, 50);
    uint32_t seed = 7;
    int64_t now = 0;
    for (int step = 0; step < 20000; step++) {
        seed = seed * 1103515245u + 12345u;
        int i = (int)((seed >> 8) % N);
        now += (seed >> 4) % 3;
        if ((seed >> 20) % 3 == 0)
            tq_arm_at(&q, &o[i].node, now + (int64_t)((seed >> 12) % 51));
        else
            tq_arm(&q, &o[i].node, now);
        while (tq_pop_expired(&q, now) != NULL)
            ;
        /* the whole queue stays sorted, so nothing due hides behind the head */
        int64_t prev = now;
        for (struct tq_node *t = q.head.next; t != &q.head; t = t->next) {
            if (!CHECK(t->deadline_ms > now && t->deadline_ms >= prev))
                return;
            prev = t->deadline_ms;
        }
    }
}

TEST(waited_carries_a_deadline_to_another_queue)
{
    struct timerq a, b;
    struct owner o[2];
    owners_init(o, 2);
    tq_init(&a, 2000);
    tq_init(&b, 2000);
    CHECK_EQ_INT(tq_waited(&a, &o[0].node, 100), 0); /* not queued */
    tq_arm(&a, &o[0].node, 100);                   /* due at 2100 */
    CHECK_EQ_INT(tq_waited(&a, &o[0].node, 100), 0);
    CHECK_EQ_INT(tq_waited(&a, &o[0].node, 1600), 1500);
    CHECK_EQ_INT(tq_waited(&a, &o[0].node, 9000), 2000); /* overdue: the whole timeout */
    /* moved at 1600 (another process, its own queue): due at 2100 still */
    tq_arm(&b, &o[1].node, 1000);                  /* an older one, due at 3000 */
    tq_arm_waited(&b, &o[0].node, tq_waited(&a, &o[0].node, 1600), 1600);
    CHECK(o[0].node.deadline_ms == 2100);
    CHECK_EQ_INT(id_of(tq_pop_expired(&b, 2100)), 0); /* ahead of the older one */
    CHECK(tq_pop_expired(&b, 2999) == NULL);
    /* more than the timeout: due now, not in the past */
    tq_arm_waited(&b, &o[0].node, 5000, 4000);
    CHECK(o[0].node.deadline_ms == 4000);
    /* none: a plain arm */
    tq_arm_waited(&b, &o[0].node, 0, 4000);
    CHECK(o[0].node.deadline_ms == 6000);
}
