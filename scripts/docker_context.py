#!/usr/bin/env python3
"""The images' build context: the files of the source tree that
deploy/docker/Dockerfile.* copy into their build stage (`COPY . .`), and a
digest of them.

The context is every file git tracks or would track (untracked files that
.gitignore does not exclude), less what .dockerignore excludes. Its digest
(sha256 over each file's path and content, in path order) names the sources
an image's binaries were built from: scripts/images labels the image with
it (LABEL_KEY) and the image tests compare that label with the tree they
test, so an image built from other sources is never taken for this tree's.

Usage: scripts/docker_context.py [--digest | --list]
"""
import argparse
import fnmatch
import hashlib
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LABEL_KEY = "ferry.source-digest"


def ignore_patterns(root=ROOT, extra=()):
    patterns = []
    with open(os.path.join(root, ".dockerignore")) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                patterns.append(line)
    return patterns + list(extra)


def ignored(path, patterns):
    """Docker's rule, as far as .dockerignore uses it: a pattern matches the
    path or one of its leading directories; "**/" matches at any depth; a
    "!" line lets a match through again (the last matching line decides)."""
    parts = path.split("/")
    prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    result = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        pat = pattern[1:] if negate else pattern
        pat = pat.strip("/")
        if pat.startswith("**/"):
            tail = pat[3:]
            hit = any(fnmatch.fnmatch(p, tail) for p in parts)
        else:
            hit = any(fnmatch.fnmatch(p, pat) for p in prefixes)
        if hit:
            result = not negate
    return result


def tree_files(root=ROOT):
    """Files git tracks or would track, relative to root."""
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=root, check=True, capture_output=True).stdout.decode()
    return [f for f in out.split("\0") if f and os.path.isfile(os.path.join(root, f))]


def context_files(root=ROOT, extra_ignores=()):
    patterns = ignore_patterns(root, extra_ignores)
    return [f for f in tree_files(root) if not ignored(f, patterns)]


def digest(root=ROOT):
    """sha256 hex of the build context's paths and contents."""
    h = hashlib.sha256()
    for f in sorted(context_files(root)):
        with open(os.path.join(root, f), "rb") as src:
            data = src.read()
        h.update(f.encode() + b"\0" + str(len(data)).encode() + b"\0" + data)
    return h.hexdigest()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--digest", action="store_true", help="print the context's digest (default)")
    what.add_argument("--list", action="store_true", help="print the context's files")
    opts = parser.parse_args()
    if opts.list:
        print("\n".join(context_files()))
    else:
        print(digest())
    return 0


if __name__ == "__main__":
    sys.exit(main())
