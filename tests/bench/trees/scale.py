#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The scale tree: scale.py N DEST writes N small text files under DEST, 1,000 to a folder
(DEST/dNNNN/subK/fNNNN.txt, K = NNNN mod 7; the last folder holds the remainder), each a
line of 5 to 40 words from a fixed vocabulary, about 190 bytes on average. The same N
gives the same tree, byte for byte, and every mtime is 2024-01-01 so that images of it
compare across runs. DEST must not exist yet."""

import os
import random
import sys

PER_FOLDER = 1000
MTIME = 1704067200  # 2024-01-01T00:00:00Z


def main():
    if len(sys.argv) != 3 or not sys.argv[1].isdigit():
        sys.exit("usage: scale.py N DEST")
    total, dest = int(sys.argv[1]), sys.argv[2]
    if os.path.lexists(dest):
        sys.exit("scale.py: %s already exists" % dest)
    rng = random.Random(total)
    letters = "abcdefghijklmnopqrstuvwxyz"
    vocab = ["".join(rng.choices(letters, k=rng.randint(3, 9))) for _ in range(2000)]
    folders = []
    for d in range((total + PER_FOLDER - 1) // PER_FOLDER):
        folder = os.path.join(dest, "d%04d" % d, "sub%d" % (d % 7))
        os.makedirs(folder)
        for f in range(min(PER_FOLDER, total - d * PER_FOLDER)):
            path = os.path.join(folder, "f%04d.txt" % f)
            with open(path, "w") as out:
                out.write(" ".join(rng.choices(vocab, k=rng.randint(5, 40))) + "\n")
            os.utime(path, (MTIME, MTIME))
        folders.append(folder)
    for folder in folders:  # after the files, whose creation touched them
        os.utime(folder, (MTIME, MTIME))
        os.utime(os.path.dirname(folder), (MTIME, MTIME))
    os.utime(dest, (MTIME, MTIME))


if __name__ == "__main__":
    main()
