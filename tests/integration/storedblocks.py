# SPDX-License-Identifier: MIT
"""The stored blocks of an image, found by walking the file rather than by asking stipple.

mkstipple writes the blocks one after the other from offset 256 (the superblock's end),
in block order: each is one zstd frame, or, stored raw, its decoded bytes. This module
finds each frame's end from zstd's own framing (RFC 8878: frame header, then blocks of
3-byte headers), so a test can compare two images' stored blocks byte for byte without
trusting stipple's block table. Only the block count and sizes come from `stipple info`.
"""

import collections
import hashlib
import json
import subprocess

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
SB_SIZE = 256


def _frame_len(buf, pos):
    """The length of the zstd frame at POS of BUF (RFC 8878, section 3.1.1)."""
    fhd = buf[pos + 4]
    fcs_flag, single, checksum, dict_flag = fhd >> 6, (fhd >> 5) & 1, (fhd >> 2) & 1, fhd & 3
    at = pos + 5 + (0 if single else 1) + (0, 1, 2, 4)[dict_flag]
    at += (1 if single else 0, 2, 4, 8)[fcs_flag]
    while True:
        hdr = int.from_bytes(buf[at:at + 3], "little")
        last, kind, size = hdr & 1, (hdr >> 1) & 3, hdr >> 3
        if kind == 3:
            raise ValueError("reserved zstd block type at %d" % at)
        at += 3 + (1 if kind == 1 else size)
        if last:
            break
    return at + (4 if checksum else 0) - pos


def body_len(frame):
    """The bytes FRAME decodes to before the run of zero blocks (blocks of one repeated
    byte 0, RFC 8878 section 3.1.1.2.2) that ends it: its content size less that run."""
    fhd = frame[4]
    fcs_flag, single, dict_flag = fhd >> 6, (fhd >> 5) & 1, fhd & 3
    at = 5 + (0 if single else 1) + (0, 1, 2, 4)[dict_flag]
    fcs_len = (1 if single else 0, 2, 4, 8)[fcs_flag]
    content = int.from_bytes(frame[at:at + fcs_len], "little") + (256 if fcs_len == 2 else 0)
    at += fcs_len
    tail = 0
    while True:
        hdr = int.from_bytes(frame[at:at + 3], "little")
        last, kind, size = hdr & 1, (hdr >> 1) & 3, hdr >> 3
        tail = tail + size if kind == 1 and frame[at + 3] == 0 else 0
        at += 3 + (1 if kind == 1 else size)
        if last:
            return content - tail


def decoded_sizes(info):
    """Each block's decoded size, from `stipple info --json` (stipple(5), DATA STREAM)."""
    size, data, hot, nhot = info["block_size"], info["data_size"], info["hot_size"], info["hot_blocks"]
    out = []
    if nhot:
        hot_block = 1 << max(0, (-(-hot // nhot) - 1).bit_length())
        out += [min(hot_block, hot - i * hot_block) for i in range(nhot)]
    pos = hot if nhot else 0
    while pos < data:
        out.append(min(size, data - pos))
        pos += size
    return out


def stored_blocks(stipple, image):
    """[(offset, stored bytes)] of IMAGE's blocks in block order."""
    info = json.loads(subprocess.run([stipple, "info", "--json", image], check=True,
                                     capture_output=True, text=True).stdout)
    with open(image, "rb") as f:
        buf = f.read()
    pos, out = SB_SIZE, []
    for size in decoded_sizes(info):
        n = _frame_len(buf, pos) if buf[pos:pos + 4] == ZSTD_MAGIC else size
        out.append((pos, buf[pos:pos + n]))
        pos += n
    return out


def block_hashes(stipple, image):
    """The SHA-256 of each stored block of IMAGE, in block order."""
    return [hashlib.sha256(b).hexdigest() for _, b in stored_blocks(stipple, image)]


def file_blocks(stipple, image):
    """{block: set of the paths (relative, no leading /) that have bytes in it}, as
    `stipple ls --blocks` lists them."""
    out = subprocess.run([stipple, "ls", "--blocks", "--json", "-R", image], check=True,
                         capture_output=True, text=True).stdout
    held = collections.defaultdict(set)
    for e in json.loads(out)["entries"]:
        for first, last in e.get("blocks") or []:
            for b in range(first, last + 1):
                held[b].add(e["path"].lstrip("/"))
    return held
