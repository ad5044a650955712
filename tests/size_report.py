#!/usr/bin/python3
"""Code size and worst-case stack of mha.h on embedded targets.

Compiles tests/test_impl.c (the implementation) for each target at -Os and
-O2 in two configurations, and reports .text/.rodata of the object and the
worst-case stack of every public function: its own frame (-fstack-usage) plus
the deepest chain of callees in the call graph (-fcallgraph-info). Functions
outside the object (libm, libgcc soft-float helpers) count as 0 and are named.

    size_report.py            print the table
    size_report.py --readme   also rewrite the table in docs/firmware.md
    size_report.py --check    fail above the budgets (Cortex-M4F -Os: .text
                              <= 20480 everything, <= 2560 for mha_forward in
                              the smallest, <= 3072 for the decoder
                              (mha_decode + mha_cache_append) and for
                              mha_forward_q8 in the smallest; stack <= 256
                              bytes for every public function but the
                              backward pass in the smallest, <= 352 in
                              everything, <= 256 for mha_forward_q8)
    size_report.py --check=everything-text,...   only the budgets named
Ends with "N passed, M failed" (budgets checked) when --check is given.
"""
import os
import re
import subprocess
import sys
import tempfile

TARGETS = [
    ("Cortex-M0+", "arm-none-eabi-gcc", ["-mcpu=cortex-m0plus", "-mthumb"], "arm-none-eabi-size"),
    ("Cortex-M4F", "arm-none-eabi-gcc", ["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"],
     "arm-none-eabi-size"),
    ("Cortex-M7", "arm-none-eabi-gcc", ["-mcpu=cortex-m7", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv5-sp-d16"],
     "arm-none-eabi-size"),
    ("Cortex-M33", "arm-none-eabi-gcc", ["-mcpu=cortex-m33", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv5-sp-d16"],
     "arm-none-eabi-size"),
    ("Cortex-M55", "arm-none-eabi-gcc", ["-mcpu=cortex-m55", "-mthumb", "-mfloat-abi=hard"], "arm-none-eabi-size"),
    ("rv32imac", "riscv64-unknown-elf-gcc", ["-march=rv32imac", "-mabi=ilp32"], "riscv64-unknown-elf-size"),
]
CONFIGS = [
    ("everything", ["-DMHA_NO_LIBM=1"]),  # with MHA_NO_LIBM, so that exp/tanh/sqrt are counted
    ("smallest", ["-DMHA_NO_LIBM=1", "-DMHA_NO_ADDITIVE=1", "-DMHA_NO_STATUS_STRINGS=1", "-DMHA_NO_EXTRAS=1"]),
]
PUBLIC = ["mha_forward", "mha_forward_reference", "mha_forward_parallel", "mha_head", "mha_concat", "mha_output",
          "mha_output_rows", "mha_workspace_size", "mha_reference_workspace_size", "mha_weight_counts_get",
          "mha_packed_weights_size", "mha_pack_weights", "mha_status_string", "mha_build_info", "mha_attend",
          "mha_attend_workspace_size", "mha_cache_bytes", "mha_cache_append", "mha_decode", "mha_decode_parallel",
          "mha_decode_reference", "mha_decode_tree", "mha_cache_row", "mha_decode_workspace_size", "mha_decode_reference_workspace_size",
          "mha_f16_from_f32", "mha_f32_from_f16", "mha_bf16_from_f32", "mha_f32_from_bf16", "mha_cache_bytes_typed",
          "mha_cache_array_bytes",
          "mha_backward", "mha_backward_workspace_size", "mha_backward_parallel",
          "mha_backward_parallel_workspace_size", "mha_forward_q8", "mha_q8_workspace_size", "mha_q8_rows",
          "mha_q8_prepare", "mha_q8_rescale_make", "mha_q8_rescale_apply", "mha_decode_q8", "mha_cache_append_q8",
          "mha_q8_decode_workspace_size", "mha_forward_q16", "mha_q16_workspace_size", "mha_q16_prepare",
          "mha_decode_q16", "mha_cache_append_q16", "mha_q16_decode_workspace_size"]
DECODER = ["mha_decode", "mha_cache_append"]
INT8 = ["mha_forward_q8"]
# the backward pass: in the text of "everything" and in the per-function stack table, not in
# the stack budgets (which hold the inference functions a firmware calls)
TRAINING = ["mha_backward", "mha_backward_workspace_size", "mha_backward_reference",
            "mha_backward_reference_workspace_size", "mha_forward_lse", "mha_backward_parallel",
            "mha_backward_parallel_workspace_size"]
# everything: the whole library (grew from 4096 when the decoding API came in,
# to 8704 with RoPE, ALiBi, the soft-cap and sinks, to 9344 with the 16-bit
# weight and cache types, to 13056 with the backward pass, and to 13824 with
# the training statistics: mha_forward_lse, its ln and the backward's
# entry for the reference path, 13610 measured, to 17920 with the int8
# path, its SMLAD products and its set-up helpers, 17718 measured, and to
# 19456 with int8 decoding, 19006 measured; 19456 measured with mha_explain and its
# messages, the checks expanded once; 19444 with keep_first, and to 20480 with
# mha_decode_tree and mha_cache_row, 20144 measured; 20286 with int8's kept rows; to 21760
# with the block caches (MHA_Q8, MHA_Q4: the quantizer, their reads, two element types,
# mha_cache_array_bytes), 21564 measured; to 24320 with the 16x8 path (mha_forward_q16: its
# two tables of 513 int16 are 2052 bytes), 24214 measured, and to 25856 with its decoding (an
# int16 cache: mha_decode_q16, mha_cache_append_q16), 25820 measured); smallest:
# mha_forward alone; decoder: mha_decode + mha_cache_append alone; int8:
# mha_forward_q8 alone
BUDGET_TEXT = {"everything": 25856, "smallest": 2560, "decoder": 3072, "int8": 3072}
# everything: the knobs' 16 bytes of call state lie in the deepest frame
# (mha__enter's); decoding from a 16-bit cache adds mha__dot16's frame (48 bytes
# more than mha__dot's) under the score loop; a tree's parents (mha_decode_tree) 24 bytes
# more on the decoding chain (mha_decode's thirteenth argument, the position map's fields);
# mha__layout's frame 8 bytes more with the block types' byte counts (mha__rows_bytes)
BUDGET_STACK = {"everything": 360, "smallest": 256, "int8": 256}


def compile_one(cc, flags, cfg, opt, tmp):
    obj = os.path.join(tmp, "impl.o")
    cmd = [cc] + flags + cfg + [opt, "-std=c99", "-ffreestanding", "-ffunction-sections", "-fdata-sections",
                                "-fstack-usage", "-fcallgraph-info=su", "-DTEST_HOOKS=0", "-c", "tests/test_impl.c",
                                "-o", obj]
    subprocess.run(cmd, check=True, cwd=ROOT)
    return obj


def sizes(size_tool, obj):
    """.text and .rodata of the object, and .text per function (-ffunction-sections)."""
    out = subprocess.run([size_tool, "-A", obj], check=True, capture_output=True, text=True).stdout
    text = rodata = 0
    per_fn = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[1].isdigit():
            if parts[0].startswith(".text"):
                text += int(parts[1])
                per_fn[parts[0][len(".text."):]] = int(parts[1])
            elif parts[0].startswith(".rodata") or parts[0].startswith(".srodata"):
                rodata += int(parts[1])
    return text, rodata, per_fn


def reachable(ci_path, *roots):
    edges = {}
    for line in open(ci_path):
        m = re.match(r'edge: \{ sourcename: "([^"]+)" targetname: "([^"]+)"', line)
        if m:
            edges.setdefault(m.group(1).split(":")[-1], set()).add(m.group(2).split(":")[-1])
    seen, pending = set(), list(roots)
    while pending:
        f = pending.pop()
        if f not in seen:
            seen.add(f)
            pending.extend(edges.get(f, ()))
    return seen


def stack(ci_path):
    """worst-case stack of each public function, and the external callees."""
    own, edges = {}, {}
    name = lambda title: title.split(":")[-1]
    for line in open(ci_path):
        m = re.match(r'node: \{ title: "([^"]+)" label: "([^"]*)"', line)
        if m:
            s = re.search(r"\\n(\d+) bytes \((static|dynamic[^)]*)\)", m.group(2))
            if s and s.group(2) != "static":
                raise SystemExit("%s: dynamic stack in %s" % (ci_path, m.group(1)))
            own[name(m.group(1))] = int(s.group(1)) if s else None
        m = re.match(r'edge: \{ sourcename: "([^"]+)" targetname: "([^"]+)"', line)
        if m:
            edges.setdefault(name(m.group(1)), set()).add(name(m.group(2)))
    externals = set()

    def depth(f, seen):
        if f in seen:
            raise SystemExit("recursion through %s" % f)
        if own.get(f) is None:
            externals.add(f)
            return 0
        return own[f] + max([depth(g, seen | {f}) for g in edges.get(f, ())] or [0])

    return {f: depth(f, frozenset()) for f in PUBLIC if f in own}, externals


def selected(budget):
    """--check tests every budget; --check=a,b only those named (everything-text,
    everything-stack, smallest-text, smallest-stack, decoder-text, int8-text,
    int8-stack)."""
    for a in sys.argv:
        if a == "--check":
            return True
        if a.startswith("--check="):
            return budget in a[len("--check="):].split(",")
    return False


# Linked images of one entry point each: the library's code and read-only data after
# --gc-sections (and, on RISC-V, the linker's relaxation of calls and addresses) beside the
# libgcc helpers it pulls in; memcpy/memset from a byte loop of this file's own.
LINKED = [("Cortex-M0+", "arm-none-eabi-gcc", ["-mcpu=cortex-m0plus", "-mthumb"], "arm-none-eabi-"),
          ("Cortex-M4F", "arm-none-eabi-gcc", ["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard",
                                               "-mfpu=fpv4-sp-d16"], "arm-none-eabi-"),
          ("Cortex-M55", "arm-none-eabi-gcc", ["-mcpu=cortex-m55", "-mthumb", "-mfloat-abi=hard"], "arm-none-eabi-"),
          ("rv32imac", "riscv64-unknown-elf-gcc", ["-march=rv32imac", "-mabi=ilp32"], "riscv64-unknown-elf-")]
MEMFUNCS = """#include <stddef.h>
void *memcpy(void *d, const void *s, size_t n) { unsigned char *a = d; const unsigned char *b = s;
    while (n--) *a++ = *b++; return d; }
void *memset(void *d, int c, size_t n) { unsigned char *a = d; while (n--) *a++ = (unsigned char)c; return d; }
"""


def helper_stack(objdump, elf, names):
    """The deepest stack of the libgcc helpers named, from their disassembly: each function's
    frame (Arm: push, stmdb sp! and sub sp, a register list counted as its entries; RISC-V:
    add sp,sp,-N) plus its deepest callee's (bl, jal)."""
    frame, calls, fn = {}, {}, None
    for line in subprocess.run([objdump, "-d", elf], capture_output=True, text=True, check=True).stdout.splitlines():
        m = re.match(r"^[0-9a-f]+ <([^>]+)>:", line)
        if m:
            fn = m.group(1)
            frame[fn], calls[fn] = 0, set()
            continue
        if fn is None:
            continue
        m = re.search(r"\t(?:push(?:\.w)?|stmdb\s+sp!,)\s*\{([^}]*)\}", line)
        if m:
            frame[fn] += 4 * len(m.group(1).split(","))
        m = re.search(r"\tsub(?:\.w)?\s+sp, (?:sp, )?#(\d+)", line) or re.search(r"\tadd\s+sp,sp,-(\d+)", line)
        if m:
            frame[fn] += int(m.group(1))
        m = re.search(r"\t(?:bl|jal|call)\s+(?:ra,)?[0-9a-f]+ <([^>+]+)>", line)
        if m:
            calls[fn].add(m.group(1))

    def depth(f, seen):
        return frame.get(f, 0) + max([depth(g, seen | {f}) for g in calls.get(f, ()) if g not in seen] or [0])
    return max([depth(f, set()) for f in names] or [0])


def linked(tmp):
    """Rows of (target, entry, "library .text / .rodata", helper bytes, helpers' deepest stack,
    helpers' names) at -Os, smallest."""
    out = []
    mem_c = os.path.join(tmp, "mem.c")
    open(mem_c, "w").write(MEMFUNCS)
    for tname, cc, flags, prefix in LINKED:
        base = [cc] + flags + ["-Os", "-std=c99", "-ffreestanding", "-ffunction-sections", "-fdata-sections"]
        impl, mem = os.path.join(tmp, "limpl.o"), os.path.join(tmp, "mem.o")
        subprocess.run(base + CONFIGS[1][1] + ["-DTEST_HOOKS=0", "-c", "tests/test_impl.c", "-o", impl], check=True,
                       cwd=ROOT)
        subprocess.run(base + ["-c", mem_c, "-o", mem], check=True, cwd=ROOT)
        for entry in ("mha_forward", "mha_forward_q8"):
            elf = os.path.join(tmp, "linked.elf")
            subprocess.run([cc] + flags + ["-nostdlib", "-nostartfiles", "-Wl,--gc-sections", "-Wl,-e," + entry,
                                           "-Wl,--undefined=" + entry, impl, mem, "-lgcc", "-o", elf],
                           check=True, cwd=ROOT)
            lib = ro = helpers = 0
            names, seen = [], set()
            for line in subprocess.run([prefix + "nm", "-S", "--size-sort", elf], capture_output=True, text=True,
                                       check=True).stdout.splitlines():
                f = line.split()
                if len(f) != 4 or f[2] not in "TtRr" or f[3] in ("memcpy", "memset"):
                    continue
                names += [f[3]] if f[3].startswith("__") else []
                if f[0] in seen:  # an alias (__eqsf2 and __nesf2 are one function)
                    continue
                seen.add(f[0])
                if f[3].startswith("__"):  # libgcc: soft float, count leading zeros, its table
                    helpers += int(f[1], 16)
                elif f[2] in "Rr":
                    ro += int(f[1], 16)
                else:
                    lib += int(f[1], 16)
            out.append((tname, entry, "%d / %d" % (lib, ro), helpers, helper_stack(prefix + "objdump", elf, names),
                        sorted(set(names))))
    return out


def main():
    rows, stack_rows, failures, checks = [], [], [], 0
    smallest_stack = {}
    m4f = {}
    with tempfile.TemporaryDirectory() as tmp:
        for tname, cc, flags, size_tool in TARGETS:
            for cname, cfg in CONFIGS:
                cells = []
                for opt in ("-Os", "-O2"):
                    obj = compile_one(cc, flags, cfg, opt, tmp)
                    text, rodata, per_fn = sizes(size_tool, obj)
                    ci = os.path.join(tmp, "impl.ci")
                    fwd = sum(per_fn.get(f, 0) for f in reachable(ci, "mha_forward"))
                    dec = sum(per_fn.get(f, 0) for f in reachable(ci, *DECODER))
                    q8 = sum(per_fn.get(f, 0) for f in reachable(ci, *INT8))
                    cells += ["%d / %d" % (text, rodata), str(fwd), str(dec), str(q8)]
                    st, ext = stack(ci)
                    if opt == "-Os":
                        worst = max(v for f, v in st.items() if f not in TRAINING)
                        stack_rows.append((tname, cname, st, sorted(ext)))
                        if cname == "smallest":
                            smallest_stack[tname] = st
                        if tname == "Cortex-M4F":
                            m4f[cname] = st
                            # everything: the whole object; smallest: forward only, and the decoder
                            measured = [("%s-text" % cname, text if cname == "everything" else fwd,
                                         BUDGET_TEXT[cname]), ("%s-stack" % cname, worst, BUDGET_STACK[cname])]
                            if cname == "smallest":
                                measured.append(("decoder-text", dec, BUDGET_TEXT["decoder"]))
                                measured.append(("int8-text", q8, BUDGET_TEXT["int8"]))
                                measured.append(("int8-stack", st["mha_forward_q8"], BUDGET_STACK["int8"]))
                            for budget, value, limit in measured:
                                if selected(budget):
                                    checks += 1
                                    if value > limit:
                                        failures.append("%s %s -Os %s %d > %d" % (tname, cname, budget, value,
                                                                                 limit))
                rows.append("| %s | %s | %s |" % (tname, cname, " | ".join(cells)))
                print(rows[-1], flush=True)
    table = ["| target | configuration | -Os .text / .rodata | -Os, mha_forward only | -Os, decoder only |"
             " -Os, int8 forward only | -O2 .text / .rodata | -O2, mha_forward only | -O2, decoder only |"
             " -O2, int8 forward only |",
             "|---|---|---|---|---|---|---|---|---|---|"] + rows
    table += ["", "Worst-case stack in bytes at -Os (own frame + deepest callee chain), over every public function but"
              " the backward pass (in the table after this one):",
              "", "| target | configuration | worst | in | outside the object |", "|---|---|---|---|---|"]
    for tname, cname, st, ext in stack_rows:
        worst = max(v for f, v in st.items() if f not in TRAINING)
        table.append("| %s | %s | %d | %s | %s |" % (tname, cname, worst,
                                                     ", ".join(f for f in PUBLIC if st.get(f) == worst),
                                                     ", ".join(ext) or "none"))
    table += ["", "Linked at -Os, smallest configuration, one entry point, `--gc-sections` (and on RISC-V the"
              " linker's relaxation): the library's code and read-only data beside the libgcc helpers it pulls"
              " in (soft float on the M0+ and rv32imac), in bytes:", "",
              "| target | entry | mha.h .text / .rodata | its stack | libgcc helpers | their deepest stack |"
              " helpers |", "|---|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        for tname, entry, lib, helpers, hstack, names in linked(tmp):
            st = smallest_stack.get(tname, {}).get(entry)
            table.append("| %s | %s | %s | %s | %d | %d | %s |" % (tname, entry, lib, "-" if st is None else st,
                                                                   helpers, hstack, ", ".join(names) or "none"))
    table += ["", "Cortex-M4F, -Os, stack of each public function:", "",
              "| function | everything | smallest |", "|---|---|---|"]
    for f in PUBLIC:
        table.append("| %s | %s | %s |" % (f, m4f.get("everything", {}).get(f, "-"),
                                          m4f.get("smallest", {}).get(f, "-")))
    text = "\n".join(table)
    print(text)
    if "--readme" in sys.argv:
        path = os.path.join(ROOT, "docs", "firmware.md")
        readme = open(path).read()
        begin, end = "<!-- size-table begin -->", "<!-- size-table end -->"
        a, b = readme.index(begin) + len(begin), readme.index(end)
        open(path, "w").write(readme[:a] + "\n" + text + "\n" + readme[b:])
    if any(a.startswith("--check") for a in sys.argv):
        for f in failures:
            print("over budget:", f)
        print("%d passed, %d failed" % (checks - len(failures), len(failures)))
        return 1 if failures else 0
    return 0


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if __name__ == "__main__":
    sys.exit(main())
