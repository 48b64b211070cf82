#!/usr/bin/env python3
"""Reads `go test -json` on stdin and prints what `go test` would for a failing run, plus a summary.

The console gets: every package's own output (the lines no test wrote, e.g. `ok`, `FAIL`, the
Proxmox schema line), the whole output of every test that failed, and at the end the slowest
top-level tests with their times, which is where the suite's time goes. The raw JSON is kept by
the caller (make e2e tees it into .cache/e2e.json) for a closer look.

Usage: go test -json ... | tools/e2esummary/summary.py [--slowest N] [--out FILE]
Exits non-zero when a test or package failed, or when the input held no test at all.
"""

import argparse
import json
import sys


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--slowest", type=int, default=10)
    ap.add_argument("--out", help="also write the summary to this file")
    args = ap.parse_args()

    output: dict[tuple[str, str], list[str]] = {}
    elapsed: dict[str, float] = {}
    running: dict[tuple[str, str], None] = {}  # started, not ended: insertion-ordered
    failed = 0
    package_failed = False
    tests = 0

    try:
        for line in sys.stdin:
            try:
                ev = json.loads(line)
            except json.JSONDecodeError:
                print(line, end="")  # the go command's own errors are not JSON
                package_failed = True
                continue
            pkg, test, action = ev.get("Package", ""), ev.get("Test", ""), ev.get("Action")
            key = (pkg, test)
            if action == "build-output":
                print(ev.get("Output", ""), end="")
            elif action == "build-fail":
                package_failed = True
            elif action == "run" and test:
                running[key] = None
            elif action == "output":
                if test:
                    output.setdefault(key, []).append(ev["Output"])
                else:
                    print(ev["Output"], end="", flush=True)
            elif action in ("pass", "fail", "skip") and test:
                tests += 1
                running.pop(key, None)
                if "/" not in test:
                    elapsed[test] = ev.get("Elapsed", 0.0)
                lines = output.pop(key, [])
                if action == "fail":
                    # As go test prints it, when it fails (test2json frames each test's own lines).
                    failed += 1
                    print("".join(lines), end="", flush=True)
            elif action == "fail" and not test:
                package_failed = True
    except KeyboardInterrupt:
        print("\ninterrupted: what ran so far follows", flush=True)
        package_failed = True

    if package_failed or failed:
        # A test that never ended (the binary's -timeout panic, an os.Exit, a panic in another
        # goroutine) holds the lines that say why: test2json gives them to the last test it named.
        for key in running:
            print("".join(output.get(key, [])), end="")

    slowest = sorted(elapsed.items(), key=lambda kv: -kv[1])[: args.slowest]
    lines = [f"slowest {len(slowest)} of {len(elapsed)} tests:"]
    lines += [f"  {secs:7.1f}s  {name}" for name, secs in slowest]
    lines.append(f"sum of the tests' own times: {sum(elapsed.values()):.0f}s")
    summary = "\n".join(lines) + "\n"
    print(summary, end="")
    if args.out:
        with open(args.out, "a", encoding="utf-8") as f:
            f.write(summary)

    if tests == 0:
        print("no test ran", file=sys.stderr)
        return 1
    return 1 if failed or package_failed else 0


if __name__ == "__main__":
    sys.exit(main())
