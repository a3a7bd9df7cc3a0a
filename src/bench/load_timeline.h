/* herd load --timeline: what happened in each slice of the run (100 ms by
 * default), so a reload or any other event can be seen in time: complete
 * responses, errors by kind and a coarse latency histogram per slice.
 * Each load thread fills its own timeline (no sharing, no locks); the run
 * adds them up at the end. A run without --timeline allocates nothing and
 * pays one predictable branch per response.
 *
 * Latency per slice is kept in log-linear bins of 1/8 octave (at most 9%
 * wide), not in an HDR histogram per slice (270 KiB each): the JSON names
 * each bin by its middle, so a reader that merges slices into an HDR
 * histogram (hdr_add_json) gets percentiles within about 5%. */
#ifndef HERD_BENCH_LOAD_TIMELINE_H
#define HERD_BENCH_LOAD_TIMELINE_H

#include <stdint.h>
#include <stdio.h>

#include "bench/load_run.h"


#define TL_SUB_BITS 3
#define TL_BINS (43 << TL_SUB_BITS)      /* up to 2^43 ns, past HDR_MAX */
#define TL_MAX_SLICES 36000              /* 1 h at 100 ms; later events are counted as late */

struct tl_slice {
    uint64_t responses;
    uint32_t errors[LOAD_NERR];
    uint64_t lat_min, lat_max, lat_sum;  /* ns, of the responses */
    uint32_t bins[TL_BINS];
};

struct load_timeline {
    int64_t origin_ns;       /* CLOCK_MONOTONIC of slice 0's start: when measuring began */
    int64_t slice_ns;
    uint32_t nslices;
    uint64_t late;           /* events past the last slice, not in any */
    struct tl_slice *s;
};

/* Room for a run of span_ns in slices of slice_ns. 0, or -ENOMEM. */
int tl_init(struct load_timeline *tl, int64_t origin_ns, int64_t slice_ns, int64_t span_ns);
void tl_free(struct load_timeline *tl);

void tl_response(struct load_timeline *tl, int64_t now, uint64_t latency_ns);
void tl_error(struct load_timeline *tl, int64_t now, enum load_err kind);

/* Adds src (same origin and slice) to dst. */
void tl_merge(struct load_timeline *dst, const struct load_timeline *src);

/* The JSON value of "timeline": {"slice_ms", "origin_monotonic_ns", "late",
 * "slices": [{"t_ms", "responses", "errors": {kind: n, ...}, "latency":
 * {hdr_write_json's layout, unit "ns"}}, ...]}, every slice up to the last
 * one with an event. */
void tl_write_json(const struct load_timeline *tl, FILE *f);

/* The bin of v and the value that names it (its middle), for tests. */
uint32_t tl_bin(uint64_t v);
uint64_t tl_bin_value(uint32_t bin);

#endif
