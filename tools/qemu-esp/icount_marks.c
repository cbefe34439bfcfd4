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
 * Arguments: out=PATH (default stderr), mark=0xADDR (may repeat).
 * Output, written at exit:
 *   total <vcpu> <instructions>          one line per vCPU
 *   mark <vcpu> <address> <instructions>  one line per marker hit, in order
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

static void on_mark(unsigned int vcpu, void *udata)
{
    /* The inline add of this instruction runs before this callback: the
     * snapshot includes the marker instruction itself. */
    uint64_t addr = (uint64_t)(uintptr_t)udata;
    uint64_t n = qemu_plugin_u64_get(count, vcpu);
    g_mutex_lock(&lock);
    g_string_append_printf(hits, "mark %u 0x%" PRIx64 " %" PRIu64 "\n", vcpu, addr, n);
    g_mutex_unlock(&lock);
}

static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    size_t n = qemu_plugin_tb_n_insns(tb);
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
        } else {
            fprintf(stderr, "icount_marks: unknown argument %s (out=PATH, mark=0xADDR)\n", argv[i]);
            return -1;
        }
    }
    hits = g_string_new("");
    counts = qemu_plugin_scoreboard_new(sizeof(uint64_t));
    count = qemu_plugin_scoreboard_u64(counts);
    qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
    qemu_plugin_register_atexit_cb(id, at_exit, NULL);
    return 0;
}
