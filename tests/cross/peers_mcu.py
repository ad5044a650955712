#!/usr/bin/python3
"""make peers-mcu: mha_forward_q8 against the same int8 attention layer composed from Arm CMSIS-NN's
kernels (tests/cross/cmsis_kws.c: the keyword-spotting layer, d 64, 4 heads of 16, n = m = 49), on the
Cortex-M cores QEMU emulates, counted the same way (executed instructions, tests/cross/count_insns.py),
both at -O2 with arm-none-eabi-gcc. On the M55 a second row builds CMSIS-NN's softmax with clang:
GCC 12.2 stops with an internal error on its Helium code, so CMSIS-NN falls back to scalar code there.

    peers_mcu.py [--readme]     CMSIS-NN's folder from $CMSIS_NN (default ../shared/third_party/cmsis-nn);
                                --readme rewrites the table in docs/int8.md between its markers

Prints the table (instructions per layer, the ratio, the composition's stages, .text of each side's
functions in the linked program) and each core's output comparison, then "N passed, M failed"; without
the CMSIS-NN folder or the compilers it says so and counts nothing (0 passed, 0 failed)."""
import glob
import os
import re
import shutil
import subprocess
import sys

from insn_report import rewrite_between  # the same folder

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CMSIS = os.path.abspath(os.path.join(ROOT, os.environ.get("CMSIS_NN", "../shared/third_party/cmsis-nn")))
SOURCES = ["FullyConnectedFunctions/arm_fully_connected_s8.c",
           "FullyConnectedFunctions/arm_fully_connected_per_channel_s8.c",
           "FullyConnectedFunctions/arm_vector_sum_s8.c", "FullyConnectedFunctions/arm_batch_matmul_s8.c",
           "SoftmaxFunctions/arm_softmax_s8.c", "SoftmaxFunctions/arm_nn_softmax_common_s8.c",
           "TransposeFunctions/arm_transpose_s8.c"]
CORES = [  # name, QEMU machine, memory map folder, compiler flags, clang's softmax
    ("Cortex-M4F", "mps2-an386", "mps2", ["-mcpu=cortex-m4", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"], False),
    ("Cortex-M7", "mps2-an500", "mps2", ["-mcpu=cortex-m7", "-mfloat-abi=hard", "-mfpu=fpv5-sp-d16"], False),
    ("Cortex-M33", "mps2-an505", "an505", ["-mcpu=cortex-m33", "-mfloat-abi=hard", "-mfpu=fpv5-sp-d16"], False),
    ("Cortex-M55, CMSIS-NN by GCC (scalar softmax)", "mps3-an547", "an547", ["-mcpu=cortex-m55",
                                                                            "-mfloat-abi=hard"], False),
    ("Cortex-M55, CMSIS-NN's Helium softmax by clang", "mps3-an547", "an547", ["-mcpu=cortex-m55",
                                                                              "-mfloat-abi=hard"], True),
]
STAGES = "mha,fc_q,fc_k,fc_v,transposes,qk,softmax,pv,transpose,fc_o,per_channel"


def run(cmd, **kw):
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, **kw)


def gcc_include():
    """newlib's C headers, for clang building for the same target (clang's own arm_mve.h)."""
    out = run(["arm-none-eabi-gcc", "-print-sysroot"]).stdout.strip()
    inc = [os.path.join(out, "include")] if out else []
    return [x for x in inc + ["/usr/lib/arm-none-eabi/include"] if os.path.isdir(x)]


def build(index, name, flags, clang_softmax, out_dir):
    elf = os.path.join(out_dir, "cmsis-kws-%d.elf" % index)
    objs = []
    cflags = flags + ["-mthumb", "-O2", "-std=c99", "-ffunction-sections", "-fdata-sections",
                      "-I" + os.path.join(CMSIS, "Include"), "-DMHA_NO_LIBM=1"]
    sources = [os.path.join(CMSIS, "Source", s) for s in SOURCES]
    sources += sorted(x for x in glob.glob(os.path.join(CMSIS, "Source", "NNSupportFunctions", "*.c"))
                      if not re.search(r"_f(16|32)\.c$", x))  # the integer helpers
    for i, src in enumerate(sources):
        obj = os.path.join(out_dir, "cmsis-%d-%d.o" % (index, i))
        if clang_softmax and src.endswith("arm_softmax_s8.c"):
            cmd = ["clang", "--target=arm-none-eabi", "-mthumb", "-O2", "-std=c99", "-ffunction-sections",
                   "-mcpu=cortex-m55", "-mfloat-abi=hard", "-I" + os.path.join(CMSIS, "Include")]
            cmd += ["-isystem" + d for d in gcc_include()] + ["-c", src, "-o", obj]
        else:
            cmd = ["arm-none-eabi-gcc"] + cflags + ["-c", src, "-o", obj]
        r = run(cmd)
        if r.returncode != 0:
            return None, "%s: %s" % (os.path.basename(src), r.stderr.strip()[-400:])
        objs.append(obj)
    cmd = ["arm-none-eabi-gcc"] + cflags + ["-Itests", "--specs=rdimon.specs", "-Wl,--gc-sections",
                                            "-Ltests/cross/" + CORES[index][2], "-T", "tests/cross/cortexm.ld",
                                            "tests/cross/cortexm_startup.c", "tests/cross/cmsis_kws.c",
                                            "tests/test_impl.c"] + objs + ["-lm", "-o", elf]
    r = run(cmd)
    return (elf, "") if r.returncode == 0 else (None, r.stderr.strip()[-800:])


def text_sizes(elf):
    """.text bytes of CMSIS-NN's functions (arm_*) and of mha_forward_q8 with the private functions it runs
    (mha__q8_*, mha__visible, mha__decode_sees; not mha_q8_prepare's set-up) in the linked program."""
    out = run(["arm-none-eabi-nm", "-S", "--size-sort", elf]).stdout
    cmsis = mha = 0
    for line in out.splitlines():
        f = line.split()
        if len(f) != 4 or f[2] not in "tT":
            continue
        size, sym = int(f[1], 16), f[3]
        if sym.startswith("arm_"):
            cmsis += size
        elif sym in ("mha_forward_q8", "mha__visible") or (sym.startswith("mha__q8_") and
                                                          sym not in ("mha__q8_rescale_make",)):
            mha += size
    return mha, cmsis


def main(argv):
    tools = all(shutil.which(t) for t in ("arm-none-eabi-gcc", "qemu-system-arm", "clang"))
    if not os.path.isdir(os.path.join(CMSIS, "Source")) or not tools:
        print("peers-mcu: skipped: CMSIS-NN not at %s (set CMSIS_NN) or arm-none-eabi-gcc, qemu-system-arm, clang "
              "missing" % CMSIS)
        print("0 passed, 0 failed")
        return 0
    out_dir = os.path.join(ROOT, os.environ.get("BUILD", "build"), "cross")
    os.makedirs(out_dir, exist_ok=True)
    rows, notes, passed, failed = [], [], 0, 0
    for index, (name, machine, mem, flags, clang_softmax) in enumerate(CORES):
        elf, why = build(index, name, flags, clang_softmax, out_dir)
        counts = None
        if elf:
            r = run(["timeout", "300", "qemu-system-arm", "-M", machine, "-nographic", "-semihosting", "-kernel",
                     elf])
            if "1 passed, 0 failed" in r.stdout:
                notes.append("%s:\n%s" % (name, "\n".join("    " + x for x in r.stdout.splitlines()
                                                           if "passed," not in x)))
                cnt = run([sys.executable, "tests/cross/count_insns.py", machine, elf, "kws_mark", "kws",
                           STAGES]).stdout
                m = re.search(r"kws: (.*) instructions", cnt)
                counts = m and dict((k, int(v)) for k, v in (x.split() for x in m.group(1).split(", ")))
            else:
                why = r.stdout + r.stderr
        if not counts:
            failed += 1
            print("%s: failed: %s" % (name, why))
            rows.append("| %s | failed | | | | | | | |" % name)
            continue
        passed += 1
        comp = sum(v for k, v in counts.items() if k not in ("mha", "per_channel"))
        fc = counts["fc_q"] + counts["fc_k"] + counts["fc_v"] + counts["fc_o"]
        mha_text, cmsis_text = text_sizes(elf)
        rows.append("| %s | %s | %s | %s | %.2f | %s | %s | %s | %s | %s / %s |" % (
            name, format(counts["mha"], ","), format(comp, ","), format(counts["per_channel"], ","),
            counts["mha"] / comp, format(fc, ","), format(counts["qk"] + counts["pv"], ","),
            format(counts["softmax"], ","), format(counts["transposes"] + counts["transpose"], ","),
            format(mha_text, ","), format(cmsis_text, ",")))
    table = ("| core | `mha_forward_q8` | CMSIS-NN, per tensor | CMSIS-NN, per channel | mha.h / CMSIS-NN (per "
             "tensor) | of which: fully connected ×4 | batch matmuls ×2 | softmax | transposes ×4 | .text: mha.h / "
             "CMSIS-NN (bytes, -O2, linked) |\n|---|---|---|---|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n")
    print(table)
    print("\n".join(notes))
    if "--readme" in argv:
        rewrite_between(os.path.join(ROOT, "docs", "int8.md"), "peers-mcu", table)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
