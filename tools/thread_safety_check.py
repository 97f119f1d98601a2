#!/usr/bin/env python3
"""clang's thread-safety analysis over compile actions, without building.

Reads `bazel aquery --config=tsa --output=jsonproto` (the CppCompile
actions of //...: their exact clang command lines, -Werror=thread-safety
included) and runs each one with -fsyntax-only from a copy of the exec
root's layout. The analysis is part of clang's semantic checks, so a
syntax-only run reports exactly what the compile would; it skips code
generation and linking (Note [Thread-safety check] in
tools/thread_safety_check.sh).

  thread_safety_check.py AQUERY_JSON EXEC_DIR [--jobs=N] [--only=FILE,...] [--all]

Run from the repository root. Without --all or --only it checks only the
units that can hold a thread-safety diagnostic of ours (could_diagnose).

Prints every failing translation unit's diagnostics, then one line
"thread-safety: N units, N failed, CPU s, wall s". Exits 1 if any failed.
"""
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import time

# What the analysis reads: a capability, a lock, an annotation.
LOCKING = re.compile(
    r"Mutex|GUARDED_BY|LOCKS_REQUIRED|LOCKS_EXCLUDED|_HELD|Lock\(|LOCK_RETURNED|"
    r"SHARED_LOCKS|EXCLUSIVE_LOCK|NO_THREAD_SAFETY|LOCKABLE|\.Await|Condition")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def syntax_only(args):
    """The compile's command line with -fsyntax-only and no outputs."""
    out = []
    skip = 0
    for a in args:
        if skip:
            skip -= 1
            continue
        if a in ("-o", "-MF"):
            skip = 1
            continue
        if a == "-MD":
            continue
        out.append(a)
    return out + ["-fsyntax-only", "-fno-color-diagnostics"]


def could_diagnose(path, memo, visiting=()):
    """Whether `path` or a repository header it includes, at any depth,
    mentions locking (Note [Thread-safety check]: a unit whose code never
    names a capability, a lock or an annotation has nothing to analyse).
    Headers outside the repository (system, generated) are not followed."""
    if path in memo:
        return memo[path]
    if path in visiting or not os.path.isfile(path):
        return False
    with open(path, errors="replace") as f:
        text = f.read()
    found = bool(LOCKING.search(text)) or any(
        could_diagnose(h, memo, visiting + (path,)) for h in INCLUDE.findall(text))
    memo[path] = found
    return found


def run(args, cwd):
    """(exit code, stderr, CPU seconds) of one syntax-only compile."""
    with subprocess.Popen(args, cwd=cwd, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True) as p:
        err = p.stderr.read()
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
    return p.returncode, err, usage.ru_utime + usage.ru_stime


def main():
    positional = [a for a in sys.argv[1:] if not a.startswith("--")]
    flags = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
    aquery, exec_dir = positional
    jobs = int(flags.get("jobs", str(os.cpu_count() or 2)))
    only = set(flags["only"].split(",")) if "only" in flags else None
    every = "--all" in sys.argv[1:] or only is not None  # named units: each checked

    units = []
    skipped = 0
    memo = {}
    for action in json.load(open(aquery)).get("actions", []):
        args = action["arguments"]
        src = args[args.index("-c") + 1]
        if only is not None and src not in only:
            continue
        if not every and not could_diagnose(src, memo):
            skipped += 1
            continue
        units.append((src, syntax_only(args)))
    units.sort()

    start = time.time()
    failed = 0
    cpu = 0.0
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        results = pool.map(lambda u: (u[0],) + run(u[1], exec_dir), units)
        for src, code, err, seconds in results:
            cpu += seconds
            if code != 0:
                failed += 1
                print(f"FAILED {src}\n{err}", flush=True)
            elif "warning:" in err:
                print(f"WARNINGS {src}\n{err}", flush=True)
    wall = time.time() - start
    print(f"thread-safety: {len(units)} units, {failed} failed, "
          f"{cpu:.0f} CPU s, {wall:.0f} s wall ({jobs} jobs; {skipped} units "
          f"that name no lock skipped, --all checks them)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
