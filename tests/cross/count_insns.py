#!/usr/bin/python3
"""Counts the instructions that a Cortex-M program executes between calls of a marker function,
under qemu-system-arm (which has no cycle timing): it runs the program with
`-d in_asm,exec,nochain`, learns each translated block's instruction count from the in_asm
listing, and adds up the blocks as the exec trace runs them (nochain: every execution is
logged). Prints the count between each pair of consecutive markers, and their mean; with
NAMES (a comma list, one name a pair), each count by its name instead.

    count_insns.py MACHINE ELF MARKER [LABEL [NAMES]]
"""
import subprocess
import sys


def main(argv):
    machine, elf, marker = argv[:3]
    label = argv[3] if len(argv) > 3 else marker
    names = argv[4].split(",") if len(argv) > 4 else None
    cmd = ["qemu-system-arm", "-M", machine, "-nographic", "-semihosting", "-kernel", elf,
           "-d", "in_asm,exec,nochain", "-D", "/dev/stdout"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1 << 20)
    sizes, block, total, marks = {}, None, 0, []
    for line in proc.stdout:
        if line.startswith("IN:"):
            block = []
        elif block is not None and line.startswith("0x"):
            block.append(int(line.split(":", 1)[0], 16))
        elif line.startswith("Trace "):
            if block:
                sizes[block[0]] = len(block)
            block = None
            fields = line.split("[", 1)[1].split("]", 1)
            pc = int(fields[0].split("/")[1], 16)
            if fields[1].strip() == marker:
                marks.append((total, pc))
            total += sizes.get(pc, 0)
        elif block and not line.strip():
            sizes[block[0]] = len(block)
            block = None
    proc.wait()
    counts = [b[0] - a[0] for a, b in zip(marks, marks[1:])]
    if proc.returncode != 0 or not counts:
        print("count_insns: %s gave no markers (exit %d)" % (elf, proc.returncode))
        print("0 passed, 1 failed")
        return 1
    if names and len(names) == len(counts):
        print("%s: %s instructions" % (label, ", ".join("%s %d" % nc for nc in zip(names, counts))))
    else:
        print("%s: %s instructions between markers (%d runs), mean %.0f" % (
            label, ", ".join(str(c) for c in counts), len(counts), sum(counts) / len(counts)))
    print("1 passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
