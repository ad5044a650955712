/* A QEMU TCG plugin that counts the guest instructions executed between calls of a marker
   function, exactly: each translated block adds its instruction count each time it runs, and a
   block that starts at the marker's address first records the count so far. At exit it writes
   one line, "marks C1 C2 ...", the count at each call of the marker, to the file given.

   Built for the host as a shared object (tests/cross/count_insns.py builds and runs it):
       cc -shared -fPIC -O2 tests/cross/insn_plugin.c -o insn_plugin.so
       qemu-system-arm ... -plugin ./insn_plugin.so,mark=0xADDRESS,out=FILE
   The functions below are QEMU's plugin API (include/qemu/qemu-plugin.h, API version 1, QEMU
   4.2 and later), declared here so that no QEMU headers need be installed; the QEMU binary
   exports them to the plugin. One vCPU (the Cortex-M machines). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef uint64_t qemu_plugin_id_t;
struct qemu_info_t;
struct qemu_plugin_tb;
enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_CB_R_REGS, QEMU_PLUGIN_CB_RW_REGS };
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void *userdata);
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb, qemu_plugin_vcpu_udata_cb_t cb,
                                          enum qemu_plugin_cb_flags flags, void *userdata);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void *userdata);

__attribute__((visibility("default"))) int qemu_plugin_version = 1;

static uint64_t total, mark_addr, marks[4096];
static size_t n_marks;
static char out_path[4096];

static void run(unsigned int vcpu, void *n) { /* a block of n instructions runs */
    (void)vcpu;
    total += (uint64_t)(uintptr_t)n;
}
static void run_mark(unsigned int vcpu, void *n) { /* the marker's block: the count so far, then its own */
    if (n_marks < sizeof marks / sizeof marks[0]) marks[n_marks++] = total;
    run(vcpu, n);
}
static void translated(qemu_plugin_id_t id, struct qemu_plugin_tb *tb) {
    void *n = (void *)(uintptr_t)qemu_plugin_tb_n_insns(tb);
    (void)id;
    qemu_plugin_register_vcpu_tb_exec_cb(tb, qemu_plugin_tb_vaddr(tb) == mark_addr ? run_mark : run,
                                         QEMU_PLUGIN_CB_NO_REGS, n);
}
static void at_exit(qemu_plugin_id_t id, void *p) {
    FILE *f = fopen(out_path, "w");
    size_t i;
    (void)id, (void)p;
    if (!f) return;
    fputs("marks", f);
    for (i = 0; i < n_marks; ++i) fprintf(f, " %llu", (unsigned long long)marks[i]);
    fputs("\n", f);
    fclose(f);
}

__attribute__((visibility("default"))) int qemu_plugin_install(qemu_plugin_id_t id, const struct qemu_info_t *info,
                                                               int argc, char **argv) {
    int i;
    (void)info;
    for (i = 0; i < argc; ++i) {
        if (strncmp(argv[i], "mark=", 5) == 0) mark_addr = strtoull(argv[i] + 5, NULL, 0) & ~(uint64_t)1; /* Thumb bit */
        else if (strncmp(argv[i], "out=", 4) == 0 && strlen(argv[i] + 4) < sizeof out_path) strcpy(out_path, argv[i] + 4);
        else return -1;
    }
    if (!mark_addr || !out_path[0]) return -1;
    qemu_plugin_register_vcpu_tb_trans_cb(id, translated);
    qemu_plugin_register_atexit_cb(id, at_exit, NULL);
    return 0;
}
