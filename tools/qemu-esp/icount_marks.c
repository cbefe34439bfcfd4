/* QEMU TCG plugin (QEMU >= 9.0 plugin API) for Espressif's QEMU: exact guest
 * instruction counts per vCPU, and a snapshot of the count each time the
 * guest executes the instruction at a marker address.
 *
 * Why: under emulation there are no cycles worth reporting, but the number
 * of instructions an inference executes is exact and repeatable. The runner
 * app calls espnn_pal_cycle_count() right before and right after every timed
 * run; passing that function's address as mark=0x... gives, per run, the
 * instructions between the two calls (the run itself, plus any interrupt the
 * vCPU took meanwhile: run QEMU with -icount for a repeatable timer).
 *
 * Arguments: out=PATH (default stderr), mark=0xADDR (may repeat),
 * profile=1 (also count, per translated block, the instructions executed
 * between the 1st and 2nd, 3rd and 4th, ... marker hits: where the timed
 * runs spend them; the caller maps block addresses to functions),
 * window=N (with profile=1: count only inside the N-th window, from 1).
 * Output, written at exit:
 *   total <vcpu> <instructions>          one line per vCPU
 *   mark <vcpu> <address> <instructions>  one line per marker hit, in order
 *   block <address> <instructions>        with profile=1, one line per block
 * Built by tools/qemu-esp/qemu-esp (cc -shared -fPIC -I<qemu>/include). */
#include <glib.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <qemu-plugin.h>

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

#define MAX_MARKS 8

static struct qemu_plugin_scoreboard *counts;
static qemu_plugin_u64 count;
static uint64_t marks[MAX_MARKS];
static int n_marks;
static char out_path[4096];
static GMutex lock;
static GString *hits; /* "mark ..." lines, in execution order */

/* profile=1: per-block counts inside marked windows. A window is open
 * between an odd and the next even marker hit (any vCPU: the runner times
 * on one core). Blocks are keyed by start address; QEMU may translate the
 * same address more than once, so records are shared through a table. */
static int profiling;
static int window_open;
static unsigned window_index; /* windows opened so far */
static unsigned window_only;  /* window=N, or 0: every window */
static GHashTable *blocks; /* start address -> struct block* */
struct block {
    uint64_t pc;
    uint64_t insns;    /* instructions in the block */
    uint64_t executed; /* instructions executed inside windows */
};

static void on_mark(unsigned int vcpu, void *udata)
{
    /* The inline add of this instruction runs before this callback: the
     * snapshot includes the marker instruction itself. */
    uint64_t addr = (uint64_t)(uintptr_t)udata;
    uint64_t n = qemu_plugin_u64_get(count, vcpu);
    g_mutex_lock(&lock);
    g_string_append_printf(hits, "mark %u 0x%" PRIx64 " %" PRIu64 "\n", vcpu, addr, n);
    window_open = !window_open;
    if (window_open)
        window_index++;
    g_mutex_unlock(&lock);
}

static void on_block(unsigned int vcpu, void *udata)
{
    (void)vcpu;
    struct block *b = udata;
    if (window_open && (window_only == 0 || window_index == window_only))
        b->executed += b->insns;
}

static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    size_t n = qemu_plugin_tb_n_insns(tb);
    if (profiling) {
        uint64_t pc = qemu_plugin_tb_vaddr(tb);
        g_mutex_lock(&lock);
        struct block *b = g_hash_table_lookup(blocks, &pc);
        if (!b) {
            b = g_new0(struct block, 1);
            b->pc = pc;
            b->insns = n;
            g_hash_table_insert(blocks, &b->pc, b);
        }
        g_mutex_unlock(&lock);
        qemu_plugin_register_vcpu_tb_exec_cb(tb, on_block, QEMU_PLUGIN_CB_NO_REGS, b);
    }
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        qemu_plugin_register_vcpu_insn_exec_inline_per_vcpu(insn, QEMU_PLUGIN_INLINE_ADD_U64, count, 1);
        uint64_t pc = qemu_plugin_insn_vaddr(insn);
        for (int m = 0; m < n_marks; m++)
            if (pc == marks[m])
                qemu_plugin_register_vcpu_insn_exec_cb(insn, on_mark, QEMU_PLUGIN_CB_NO_REGS,
                                                       (void *)(uintptr_t)pc);
    }
}

static void at_exit(qemu_plugin_id_t id, void *p)
{
    (void)id;
    (void)p;
    FILE *f = out_path[0] ? fopen(out_path, "w") : NULL;
    FILE *o = f ? f : stderr;
    int vcpus = qemu_plugin_num_vcpus();
    for (int v = 0; v < vcpus; v++)
        fprintf(o, "total %d %" PRIu64 "\n", v, qemu_plugin_u64_get(count, v));
    g_mutex_lock(&lock);
    fputs(hits->str, o);
    if (profiling) {
        GHashTableIter it;
        gpointer key, value;
        g_hash_table_iter_init(&it, blocks);
        while (g_hash_table_iter_next(&it, &key, &value)) {
            struct block *b = value;
            if (b->executed)
                fprintf(o, "block 0x%" PRIx64 " %" PRIu64 "\n", b->pc, b->executed);
        }
    }
    g_mutex_unlock(&lock);
    if (f)
        fclose(f);
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc,
                                           char **argv)
{
    (void)info;
    for (int i = 0; i < argc; i++) {
        if (strncmp(argv[i], "out=", 4) == 0) {
            snprintf(out_path, sizeof out_path, "%s", argv[i] + 4);
        } else if (strncmp(argv[i], "mark=", 5) == 0 && n_marks < MAX_MARKS) {
            marks[n_marks++] = strtoull(argv[i] + 5, NULL, 0);
        } else if (strcmp(argv[i], "profile=1") == 0) {
            profiling = 1;
        } else if (strncmp(argv[i], "window=", 7) == 0) {
            window_only = (unsigned)strtoul(argv[i] + 7, NULL, 0);
        } else {
            fprintf(stderr, "icount_marks: unknown argument %s (out=PATH, mark=0xADDR, profile=1, window=N)\n",
                    argv[i]);
            return -1;
        }
    }
    hits = g_string_new("");
    blocks = g_hash_table_new(g_int64_hash, g_int64_equal);
    counts = qemu_plugin_scoreboard_new(sizeof(uint64_t));
    count = qemu_plugin_scoreboard_u64(counts);
    qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
    qemu_plugin_register_atexit_cb(id, at_exit, NULL);
    return 0;
}
