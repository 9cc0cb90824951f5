#!/usr/bin/python3
"""Extracts the argument list of GPT-NeoX's configs/neox_arguments.md (section, name, type,
documented default) into test/neox/neox_arguments.tsv, which test_neox_keys walks: every argument
must be in this project's NeoX key table (or be a DeepSpeed key) and its default must parse.
Regenerate from a GPT-NeoX checkout:
    test/reference/neox_arguments_tsv.py gpt-neox/configs/neox_arguments.md > test/neox/neox_arguments.tsv
"""
import re
import sys


def main():
    lines = open(sys.argv[1], encoding="utf-8").read().split("\n")
    section = None
    print("# section\tname\ttype\tdefault  (from GPT-NeoX's configs/neox_arguments.md)")
    for i, line in enumerate(lines):
        if line.startswith("## "):
            section = line[3:].strip()
        m = re.match(r"- \*\*(\w+)\*\*: (.*)", line)
        if not m:
            continue
        j = i + 1
        while not lines[j].strip().startswith("Default ="):
            j += 1
        default = lines[j].strip()[len("Default = "):]
        print("\t".join([section, m.group(1), m.group(2).strip(), default]))


if __name__ == "__main__":
    main()
