#!/usr/bin/env python3
"""Compiles ItJdbc.java against Debian's MariaDB Connector/J and runs it against the integration fixture."""

import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import itlib  # noqa: E402

JAVAC_TIMEOUT_S = 180
RUN_TIMEOUT_S = 280


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--javac", required=True)
    ap.add_argument("--java", required=True)
    ap.add_argument("--jar", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--classes", required=True)
    args = ap.parse_args()

    os.makedirs(args.classes, exist_ok=True)
    compiled = os.path.join(args.classes, "ItJdbc.class")
    if not os.path.exists(compiled) or os.path.getmtime(compiled) < os.path.getmtime(args.source):
        subprocess.run([args.javac, "--release", "17", "-cp", args.jar, "-d", args.classes, args.source],
                       check=True, timeout=JAVAC_TIMEOUT_S)
    e = itlib.env()
    cmd = [args.java, "-Xmx1g", "-cp", os.pathsep.join([args.classes, args.jar]), "ItJdbc", e["HOST"],
           str(itlib.port("direct")), str(itlib.port("proxy1")), str(itlib.port("proxy2")),
           e["NATIVE_USER"], e["NATIVE_PASSWORD"], e["ED25519_USER"], e["ED25519_PASSWORD"], e["DATABASE"]]
    return subprocess.run(cmd, timeout=RUN_TIMEOUT_S, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
