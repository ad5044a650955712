#!/usr/bin/python3
"""Instructions per inference on the Cortex-M cores that QEMU emulates, for an attention layer
of keyword-spotting size (tests/cross/kws_count.c: d 64, 4 heads of 16, n = m = 49): one
mha_forward, the 49 frames appended to a KV cache, one streaming step (mha_decode, t = 1,
against 49 cached), in fp32 and in int8 (mha_forward_q8, mha_cache_append_q8,
mha_decode_q8), the fp32 step and append with a q8 block cache, and the forward in 16x8
(mha_forward_q16). MHA_NO_LIBM=1, -O2; counted
exactly by tests/cross/count_insns.py.

    insn_report.py            print the table; "N passed, M failed" (a core whose program
                              fails or gives no count fails)
    insn_report.py --readme   also rewrite the table in docs/firmware.md between its markers
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORES = [  # name, QEMU machine, memory map folder, compiler flags
    # QEMU has no Cortex-M0+ board: ARMv6-M code (a subset of the M3's) runs on the M3's
    ("Cortex-M0+ (soft float; its code on the M3 board)", "mps2-an385", "mps2", ["-mcpu=cortex-m0plus",
                                                                                "-mfloat-abi=soft"]),
    ("Cortex-M3 (soft float)", "mps2-an385", "mps2", ["-mcpu=cortex-m3", "-mfloat-abi=soft"]),
    ("Cortex-M4F", "mps2-an386", "mps2", ["-mcpu=cortex-m4", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"]),
    ("Cortex-M7", "mps2-an500", "mps2", ["-mcpu=cortex-m7", "-mfloat-abi=hard", "-mfpu=fpv5-sp-d16"]),
    ("Cortex-M33", "mps2-an505", "an505", ["-mcpu=cortex-m33", "-mfloat-abi=hard", "-mfpu=fpv5-sp-d16"]),
    ("Cortex-M55", "mps3-an547", "an547", ["-mcpu=cortex-m55", "-mfloat-abi=hard"]),
    # the fast path with its Helium kernels (int8: the same Helium products as the row above)
    ("Cortex-M55, `MHA_FAST=1` (Helium)", "mps3-an547", "an547", ["-mcpu=cortex-m55", "-mfloat-abi=hard",
                                                                 "-DMHA_FAST=1", "-DKWS_WS=262144"]),
]


def rewrite_between(path, marker, table):
    """path's text between "<!-- marker begin -->" and "<!-- marker end -->" replaced by table"""
    text = open(path).read()
    begin, end = "<!-- %s begin -->\n" % marker, "<!-- %s end -->" % marker
    a, b = text.index(begin) + len(begin), text.index(end)
    open(path, "w").write(text[:a] + table + text[b:])


def main(argv):
    out_dir = os.path.join(ROOT, os.environ.get("BUILD", "build"), "cross")
    os.makedirs(out_dir, exist_ok=True)
    rows, passed, failed = [], 0, 0
    for index, (name, machine, mem, flags) in enumerate(CORES):
        elf = os.path.join(out_dir, "kws-%d-%s-%s.elf" % (index, machine, flags[0][6:]))
        cmd = ["arm-none-eabi-gcc"] + flags + ["-mthumb", "-O2", "-std=c99", "-DMHA_NO_LIBM=1", "-Itests",
                                               "--specs=rdimon.specs", "-Ltests/cross/" + mem, "-T",
                                               "tests/cross/cortexm.ld", "tests/cross/cortexm_startup.c",
                                               "tests/cross/kws_count.c", "tests/test_impl.c", "-o", elf]
        counts = None
        if subprocess.run(cmd, cwd=ROOT).returncode == 0:
            run = subprocess.run(["timeout", "120", "qemu-system-arm", "-M", machine, "-nographic", "-semihosting",
                                  "-kernel", elf], cwd=ROOT, capture_output=True, text=True)
            if "1 passed, 0 failed" in run.stdout:
                cnt = subprocess.run([sys.executable, "tests/cross/count_insns.py", machine, elf, "kws_mark", "kws",
                                      "forward,append,decode,setup,int8,setup8,append8,decode8,setupq,appendq,"
                                      "decodeq,setup16,int16"], cwd=ROOT,
                                     capture_output=True, text=True).stdout
                m = re.search(r"forward (\d+), append (\d+), decode (\d+), setup \d+, int8 (\d+), setup8 \d+, "
                              r"append8 (\d+), decode8 (\d+), setupq \d+, appendq (\d+), decodeq (\d+), setup16 \d+, "
                              r"int16 (\d+)", cnt)
                counts = m and tuple(int(g) for g in m.groups())
            else:
                print(run.stdout + run.stderr)
        if counts:
            passed += 1
            rows.append("| %s | %s | %s | %.1f | %s | %s | %.1f | %s | %s | %s | %s | %s |" % (
                name, format(counts[0], ","), format(counts[3], ","), counts[0] / counts[3], format(counts[2], ","),
                format(counts[5], ","), counts[2] / counts[5], format(counts[1], ","), format(counts[4], ","),
                format(counts[7], ","), format(counts[6], ","), format(counts[8], ",")))
        else:
            failed += 1
            rows.append("| %s | failed | | | | | | | | | | |" % name)
    table = ("| core | `mha_forward`, 49 × 49, fp32 | int8 | fp32 / int8 | one streaming step (1 against 49 cached),"
             " fp32 | int8 | fp32 / int8 | appending 49 frames, fp32 | int8 | one step, fp32 with a q8 cache |"
             " appending 49, q8 cache | `mha_forward_q16`, 49 × 49, 16x8 |"
             "\n|---|---|---|---|---|---|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n")
    print(table)
    if "--readme" in argv:
        rewrite_between(os.path.join(ROOT, "docs", "firmware.md"), "insn-table", table)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
