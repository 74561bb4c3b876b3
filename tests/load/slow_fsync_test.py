#!/usr/bin/env python3
"""The flash benchmark's storage-latency shim: a program that preloads it waits the configured delay in every
fsync and fdatasync (a lower bound: a sleep is never shorter), and its writes still reach the file.
Usage: slow_fsync_test.py PATH_TO_claimguard-slow-fsync.so"""
import os
import subprocess
import sys
import tempfile

CHILD = r"""
import os, sys, time
path = sys.argv[1]
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
took = []
for i, call in enumerate((os.fsync, os.fdatasync, os.fsync, os.fdatasync)):
    os.write(fd, b"x%d" % i)
    t = time.monotonic()
    call(fd)
    took.append(time.monotonic() - t)
os.close(fd)
print(" ".join("%.6f" % s for s in took))
"""

DELAY_US = 150_000


def run(shim, delay_us, path):
    env = dict(os.environ)
    if shim:
        env["LD_PRELOAD"] = shim
        env["CLAIMGUARD_FSYNC_DELAY_US"] = str(delay_us)
    out = subprocess.run([sys.executable, "-c", CHILD, path], env=env, check=True, capture_output=True,
                         text=True, timeout=30).stdout
    return [float(x) for x in out.split()]


def main():
    shim = os.path.abspath(sys.argv[1])
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "data")
        took = run(shim, DELAY_US, path)
        with open(path, "rb") as f:
            assert f.read() == b"x0x1x2x3", "the writes before the delayed calls must reach the file"
        short = [t for t in took if t < DELAY_US / 1e6]
        assert not short, f"a delayed call returned before {DELAY_US} us: {took}"
        # A bad value falls back to the default delay (1 ms) rather than disabling the shim or failing.
        took_default = run(shim, "not-a-number", path)
        assert all(t >= 0.001 for t in took_default), f"default 1 ms delay not applied: {took_default}"
    print(f"ok: with the shim each call took {min(took) * 1e3:.1f}-{max(took) * 1e3:.1f} ms "
          f"(delay {DELAY_US / 1e3:.0f} ms); default delay calls {min(took_default) * 1e3:.2f} ms or more")


if __name__ == "__main__":
    main()
