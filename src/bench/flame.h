/* Flame graphs from `perf script` output, for herd lab --profile: the
 * stacks are folded (root first, one line per distinct stack with its
 * sample count) and drawn as a standalone SVG 1.1, a box per frame, its
 * width the share of samples that passed through it (Brendan Gregg's
 * layout, written here from the idea, not from his scripts). */
#ifndef HERD_BENCH_FLAME_H
#define HERD_BENCH_FLAME_H

#include <stddef.h>

/* Reads the samples of script_path (perf script's text) and writes the
 * flame graph to svg_path (titled title). Returns the number of samples
 * drawn (0: an SVG that says there were none), or -1 with a reason. */
long flame_svg(const char *script_path, const char *svg_path, const char *title, char *err,
               size_t errlen);

#endif
