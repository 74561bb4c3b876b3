#!/usr/bin/env python3
"""Checks the Dockerfile without Docker: its runtime packages cover every shared library the
built binary links (ldd + dpkg -S), its build packages are ones scripts/setup.sh installs, and
the image's user is the one the Helm chart runs the sidecar as.

Usage: check_dockerfile.py /path/to/claimguard
"""
import os
import re
import shlex
import subprocess
import sys
import unittest

import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BINARY = None
# In debian:12-slim already (Essential or required by apt).
BASE_PACKAGES = {"libc6", "libgcc-s1", "libstdc++6"}


def read(path):
    with open(os.path.join(ROOT, path)) as f:
        return f.read()


def dockerfile_arg(name):
    m = re.search(r'^ARG %s="([^"]*)"' % name, read("Dockerfile"), re.M)
    assert m, f"Dockerfile has no ARG {name}"
    return set(m.group(1).split())


def setup_packages():
    m = re.search(r"^PACKAGES=\((.*?)^\)", read("scripts/setup.sh"), re.S | re.M)
    assert m, "scripts/setup.sh has no PACKAGES=( ... )"
    return set(shlex.split(m.group(1), comments=True))


def package_of(path):
    """The Debian package that owns a library path (usrmerge: try /lib and /usr/lib spellings)."""
    real = os.path.realpath(path)
    candidates = [path, real]
    for p in (path, real):
        if p.startswith("/usr/lib/"):
            candidates.append(p[len("/usr"):])
        elif p.startswith("/lib"):
            candidates.append("/usr" + p)
    for c in candidates:
        out = subprocess.run(["dpkg", "-S", c], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        if out.returncode == 0:
            return out.stdout.split(":")[0].strip()
    return None


def with_dependencies(packages):
    """The packages and everything they depend on (apt installs those too), from dpkg's status."""
    seen = set()
    todo = list(packages)
    while todo:
        pkg = todo.pop()
        if pkg in seen:
            continue
        seen.add(pkg)
        out = subprocess.run(["dpkg-query", "-W", "-f=${Pre-Depends}, ${Depends}", pkg], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
        if out.returncode != 0:
            continue  # not installed here: its own name still counts
        for alternative in out.stdout.split(","):
            name = alternative.split("|")[0].strip().split(" ")[0].split(":")[0]
            if name:
                todo.append(name)
    return seen


class Dockerfile(unittest.TestCase):
    def test_runtime_packages_cover_every_linked_library(self):
        self.assertTrue(os.path.exists(BINARY), f"{BINARY} is not built")
        ldd = subprocess.run(["ldd", BINARY], stdout=subprocess.PIPE, text=True, check=True).stdout
        runtime = with_dependencies(dockerfile_arg("RUNTIME_PACKAGES") | BASE_PACKAGES)
        libraries = re.findall(r"=>\s+(/\S+)", ldd) + re.findall(r"^\s+(/\S+ld-linux\S*)", ldd, re.M)
        self.assertTrue(libraries, ldd)
        missing = {}
        for lib in libraries:
            pkg = package_of(lib)
            self.assertIsNotNone(pkg, f"no Debian package owns {lib}")
            pkg = pkg.split(":")[0]
            if pkg not in runtime:
                missing[lib] = pkg
        self.assertEqual(missing, {}, "add these packages to RUNTIME_PACKAGES in the Dockerfile")

    def test_build_packages_are_installed_by_setup_sh(self):
        self.assertEqual(dockerfile_arg("BUILD_PACKAGES") - setup_packages(), set())

    def test_image_shape(self):
        text = read("Dockerfile")
        stages = re.findall(r"^FROM\s+(\S+)", text, re.M)
        self.assertEqual(stages, ["debian:12", "debian:12-slim"])
        self.assertRegex(text, r'(?m)^ENTRYPOINT \["/usr/local/bin/claimguard"\]$')
        self.assertRegex(text, r'(?m)^CMD \["serve"\]$')
        user = re.findall(r"^USER\s+(\d+):(\d+)$", text, re.M)
        self.assertEqual(len(user), 1)
        with open(os.path.join(ROOT, "helm", "claimguard", "values.yaml")) as f:
            values = yaml.safe_load(f)
        self.assertEqual(int(user[0][0]), values["sidecar"]["runAsUser"], "the chart runs as the image's user")

    def test_dockerignore_keeps_build_trees_out(self):
        ignored = [l.strip() for l in read(".dockerignore").splitlines() if l.strip() and not l.startswith("#")]
        for pattern in (".git", "build", "build-*"):
            self.assertIn(pattern, ignored)


if __name__ == "__main__":
    BINARY = sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(ROOT, "build", "proxy", "claimguard")
    unittest.main(verbosity=2)
