#include "coro/switch.h"

#include <stdint.h>

#if defined(__x86_64__) && !defined(CORO_PORTABLE)

/* coro_switch_asm(&from->sp, to->sp): push the six callee-saved registers,
 * store rsp, load the other rsp, pop its registers and return into it.
 * MXCSR and the x87 control word are left alone: nothing here changes
 * them. */
void coro_switch_asm(void **from_sp, void *to_sp);
void coro_boot_asm(void);

__asm__(".text\n"
        ".globl coro_switch_asm\n"
        ".type coro_switch_asm,@function\n"
        "coro_switch_asm:\n"
        "    pushq %rbp\n"
        "    pushq %rbx\n"
        "    pushq %r12\n"
        "    pushq %r13\n"
        "    pushq %r14\n"
        "    pushq %r15\n"
        "    movq %rsp, (%rdi)\n"
        "    movq %rsi, %rsp\n"
        "    popq %r15\n"
        "    popq %r14\n"
        "    popq %r13\n"
        "    popq %r12\n"
        "    popq %rbx\n"
        "    popq %rbp\n"
        "    ret\n"
        ".size coro_switch_asm,.-coro_switch_asm\n"
        /* First entry: the initial frame put entry in r13 and arg in r12. */
        ".globl coro_boot_asm\n"
        ".type coro_boot_asm,@function\n"
        "coro_boot_asm:\n"
        "    movq %r12, %rdi\n"
        "    andq $-16, %rsp\n"
        "    callq *%r13\n"
        "    ud2\n"
        ".size coro_boot_asm,.-coro_boot_asm\n");

void coro_ctx_init(struct coro_ctx *ctx, void *lo, size_t size, coro_entry_fn *entry, void *arg)
{
    uintptr_t top = ((uintptr_t)lo + size) & ~(uintptr_t)15;
    void **sp = (void **)(top - 8 * sizeof(void *));
    sp[0] = 0;                    /* r15 */
    sp[1] = 0;                    /* r14 */
    sp[2] = (void *)entry;        /* r13 */
    sp[3] = arg;                  /* r12 */
    sp[4] = 0;                    /* rbx */
    sp[5] = 0;                    /* rbp: ends frame-pointer walks */
    sp[6] = (void *)coro_boot_asm; /* return address */
    sp[7] = 0;
    ctx->sp = sp;
}

void coro_ctx_switch(struct coro_ctx *from, struct coro_ctx *to)
{
    coro_switch_asm(&from->sp, to->sp);
}

#else

/* The portable fallback: slower (a signal-mask syscall per switch). */
static void coro_boot_c(unsigned eh, unsigned el, unsigned ah, unsigned al)
{
    coro_entry_fn *entry = (coro_entry_fn *)(uintptr_t)((uint64_t)eh << 32 | el);
    entry((void *)(uintptr_t)((uint64_t)ah << 32 | al));
}

void coro_ctx_init(struct coro_ctx *ctx, void *lo, size_t size, coro_entry_fn *entry, void *arg)
{
    getcontext(&ctx->uc);
    ctx->uc.uc_stack.ss_sp = lo;
    ctx->uc.uc_stack.ss_size = size;
    ctx->uc.uc_link = NULL;
    /* makecontext passes ints: split the pointer in two. */
    uint64_t a = (uintptr_t)arg, e = (uintptr_t)entry;
    makecontext(&ctx->uc, (void (*)(void))coro_boot_c, 4, (unsigned)(e >> 32), (unsigned)e,
                (unsigned)(a >> 32), (unsigned)a);
}

void coro_ctx_switch(struct coro_ctx *from, struct coro_ctx *to)
{
    swapcontext(&from->uc, &to->uc);
}

#endif
