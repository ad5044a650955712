#!/usr/bin/python3
"""Counts the instructions that a Cortex-M program executes between calls of a marker function,
under qemu-system-arm (which has no cycle timing): tests/cross/insn_plugin.c, a TCG plugin built
here for the host, adds each translated block's instruction count every time the block runs and
notes the count whenever the marker's block starts. Prints the count between each pair of
consecutive markers, and their mean; with NAMES (a comma list, one name a pair), each count by
its name instead.

    count_insns.py MACHINE ELF MARKER [LABEL [NAMES]]

(The same counts as QEMU's `-d in_asm,exec,nochain` log added up block by block, a hundred
times faster.)
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def fail(elf, why):
    print("count_insns: %s: %s" % (elf, why))
    print("0 passed, 1 failed")
    return 1


def main(argv):
    machine, elf, marker = argv[:3]
    label = argv[3] if len(argv) > 3 else marker
    names = argv[4].split(",") if len(argv) > 4 else None
    plugin = elf + ".insn_plugin.so"
    marks_file = elf + ".marks"
    if subprocess.run([os.environ.get("HOST_CC", "cc"), "-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-Werror",
                       os.path.join(HERE, "insn_plugin.c"), "-o", plugin]).returncode != 0:
        return fail(elf, "the plugin does not build")
    nm = subprocess.run(["arm-none-eabi-nm", elf], capture_output=True, text=True).stdout.split("\n")
    addr = [f[0] for f in (line.split() for line in nm) if len(f) == 3 and f[2] == marker]
    if len(addr) != 1:
        return fail(elf, "no symbol %s" % marker)
    if os.path.exists(marks_file):
        os.remove(marks_file)
    run = subprocess.run(["timeout", "300", "qemu-system-arm", "-M", machine, "-nographic", "-semihosting", "-kernel",
                          elf, "-plugin", "%s,mark=0x%s,out=%s" % (plugin, addr[0], marks_file)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        marks = [int(x) for x in open(marks_file).read().split()[1:]]
    except OSError:
        marks = []
    counts = [b - a for a, b in zip(marks, marks[1:])]
    if run.returncode != 0 or not counts:
        return fail(elf, "no markers (exit %d) %s" % (run.returncode, run.stderr.strip()))
    if names and len(names) == len(counts):
        print("%s: %s instructions" % (label, ", ".join("%s %d" % nc for nc in zip(names, counts))))
    else:
        print("%s: %s instructions between markers (%d runs), mean %.0f" % (
            label, ", ".join(str(c) for c in counts), len(counts), sum(counts) / len(counts)))
    print("1 passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
