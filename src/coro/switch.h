/* The context switch: a saved stack pointer, and a switch that saves the
 * callee-saved registers on the old stack and restores them from the new
 * one. No signal mask is touched (swapcontext makes a sigprocmask syscall
 * per switch). x86-64 has a few lines of assembly; other machines fall
 * back to ucontext (also when built with -DCORO_PORTABLE, to test it). */
#ifndef HERD_CORO_SWITCH_H
#define HERD_CORO_SWITCH_H

#include <stddef.h>

#if defined(__x86_64__) && !defined(CORO_PORTABLE)
struct coro_ctx {
    void *sp;
};
#else
#include <ucontext.h>
struct coro_ctx {
    ucontext_t uc;
};
#endif

typedef void coro_entry_fn(void *arg);

/* Prepares ctx to run entry(arg) on the stack [lo, lo+size) at the first
 * switch to it. entry must never return. */
void coro_ctx_init(struct coro_ctx *ctx, void *lo, size_t size, coro_entry_fn *entry, void *arg);

/* Saves the running context into from and resumes to. */
void coro_ctx_switch(struct coro_ctx *from, struct coro_ctx *to);

#endif
