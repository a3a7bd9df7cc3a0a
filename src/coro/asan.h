/* CORO_ASAN is defined when this file is built with AddressSanitizer
 * (gcc says __SANITIZE_ADDRESS__, clang __has_feature): stacks are then
 * larger and every switch is announced to ASan. */
#ifndef HERD_CORO_ASAN_H
#define HERD_CORO_ASAN_H

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CORO_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(CORO_ASAN)
#define CORO_ASAN 1
#endif

#endif
