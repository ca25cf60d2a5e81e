#!/usr/bin/env python3
"""The warnings stage of the test command: every C file of a configured build (the library,
the command, the tests and the benchmarks, as listed in its compile_commands.json) compiled
with -Werror for each -march target of TARGETS at the two optimization levels users get
(meson's default buildtype, debugoptimized: -O2 -g; and --buildtype=release: -O3 -DNDEBUG).

GCC's flow warnings (-Wmaybe-uninitialized, -Warray-bounds, -Wstringop-overflow ...) depend on
inlining and vectorization, so on the optimization level and on the target's instruction
set: a tree that is clean at -O2 on one CPU can fail at -O3 on every CPU. This stage only
compiles (objects go to /dev/null), so it checks the same list whatever CPU runs it.

Adding a target: append its -march name to TARGETS (it must be one this GCC knows:
`gcc -march=NAME -x c -c /dev/null -o /dev/null`) and run
`python3 tests/warnings.py build`; fix what it reports in the code, not with a flag.

Usage: warnings.py BUILD_DIR [TARGET ...]   (default: all of TARGETS)
Prints one line per target and level, the warnings found, and
"warnings: N passed, N failed" (one per target and level). Exit 1 on any warning.
"""
import json
import os
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

# x86-64 levels 2-4; AMD Zen 3 (GCC 12 knows no newer AMD target); Intel Ice Lake,
# Cooper Lake (AVX512-BF16) and Sapphire Rapids (AMX) servers.
TARGETS = ["x86-64-v2", "x86-64-v3", "x86-64-v4", "znver3", "icelake-server", "cooperlake",
           "sapphirerapids"]
LEVELS = {"-O2 (debugoptimized)": ["-O2", "-g"], "-O3 (release)": ["-O3", "-DNDEBUG"]}


def base_args(command):
    """The compile command without its optimization, target, debug, NDEBUG, warning-as-error
    and dependency-file flags, and with its object sent to /dev/null."""
    args, out, skip = shlex.split(command), [], 0
    for i, a in enumerate(args):
        if skip:
            skip -= 1
            continue
        if a in ("-MQ", "-MF", "-MT", "-o"):
            skip = 1
            continue
        if (a.startswith("-O") or a.startswith("-march=") or a.startswith("-mtune=") or a == "-g"
                or a in ("-DNDEBUG", "-Werror", "-MD", "-MMD", "-fdiagnostics-color=always")):
            continue
        out.append(a)
    return out + ["-o", "/dev/null"]


def compile_one(job):
    directory, args = job
    p = subprocess.run(args, cwd=directory, capture_output=True, text=True)
    return p.returncode, p.stderr


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    build = os.path.abspath(sys.argv[1])
    targets = sys.argv[2:] or TARGETS
    with open(os.path.join(build, "compile_commands.json")) as f:
        entries = json.load(f)
    units = {}
    for e in entries:  # a file compiled into two targets with the same flags is checked once
        args = base_args(e["command"])
        units[(e["directory"], tuple(args))] = e["file"]
    jobs, keys = [], []
    for t in targets:
        for level, flags in LEVELS.items():
            for (directory, args) in units:
                jobs.append((directory, list(args[:1]) + ["-march=" + t] + flags + ["-Werror"] + list(args[1:])))
                keys.append((t, level))
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        results = list(pool.map(compile_one, jobs))
    passed = failed = 0
    for t in targets:
        for level in LEVELS:
            errs = [r[1] for k, r in zip(keys, results) if k == (t, level) and r[0] != 0]
            if errs:
                failed += 1
                print(f"FAIL -march={t} {level}: {len(errs)} of {len(units)} files")
                for e in errs:
                    print("  " + e.strip().replace("\n", "\n  "))
            else:
                passed += 1
                print(f"ok   -march={t} {level}: {len(units)} files")
    print(f"warnings: {passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
