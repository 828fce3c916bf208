# SPDX-License-Identifier: MIT
"""An independent publisher and reader of published images (stipple(5), PUBLISHED INDEX),
written from the layout alone, for the tests: `publish` splits a one-file image into
DIR/NAME.stp (the index) and DIR/blocks/HH/H64, taking the block table from
`stipple info --blocks --json`; `parse` reads an index back, checking every rule.

    python3 pubindex.py publish STIPPLE IMAGE DIR [NAME]
"""

import ctypes
import ctypes.util
import hashlib
import json
import os
import struct
import subprocess
import sys

MAGIC = b"STPINDX1"
HDR = 64
ENTRY = 48
SB = 256
DELTA = 160

_xxh = ctypes.CDLL(ctypes.util.find_library("xxhash") or "libxxhash.so.0")
_xxh.XXH3_64bits.restype = ctypes.c_uint64
_xxh.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]


def xxh3(data):
    return _xxh.XXH3_64bits(data, len(data))


def block_name(sha):
    h = sha.hex()
    return "%s/%s" % (h[:2], h)


def block_table(stipple, image):
    """[(offset, stored)] in block order, from stipple's own listing."""
    out = subprocess.run([stipple, "info", "--blocks", "--json", image], check=True,
                         capture_output=True, timeout=120).stdout
    doc = json.loads(out)
    return [(b["offset"], b["stored"]) for b in doc["block_table"]]


def make_index(data, table):
    """The index of one-file image DATA whose blocks TABLE lists, and the blocks."""
    at = SB
    blocks = []
    for off, stored in table:
        if off != at:
            raise ValueError("blocks not contiguous at %d" % off)
        blocks.append(data[off:off + stored])
        at = off + stored
    tail = at
    entries = b"".join(struct.pack("<QII", off, stored, 0) + hashlib.sha256(b).digest()
                       for (off, stored), b in zip(table, blocks))
    head = MAGIC + struct.pack("<IIQQQ", 1, 1, len(data), tail, len(table))
    csum = xxh3(head + entries)
    hdr = head + struct.pack("<Q", csum) + bytes(16)
    return hdr + entries + data[:SB] + data[tail:], blocks


def write_atomic(path, data, mode=0o644):
    tmp = "%s.tmp%d" % (path, os.getpid())
    with open(tmp, "wb") as f:
        f.write(data)
    os.chmod(tmp, mode)
    os.rename(tmp, path)


def publish(stipple, image, outdir, name=None):
    """Publishes IMAGE into OUTDIR; returns the index's path."""
    with open(image, "rb") as f:
        data = f.read()
    index, blocks = make_index(data, block_table(stipple, image))
    for b in blocks:
        sub = os.path.join(outdir, "blocks", hashlib.sha256(b).hexdigest()[:2])
        os.makedirs(sub, 0o755, exist_ok=True)
        path = os.path.join(outdir, "blocks", block_name(hashlib.sha256(b).digest()))
        if not os.path.exists(path):
            write_atomic(path, b)
    if not name:
        base = os.path.basename(image)
        name = base[:-4] if base.endswith(".stp") else base
    dest = os.path.join(outdir, name + ".stp")
    write_atomic(dest, index)
    return dest


def parse_deltas(raw, count):
    """Version 2's delta entries: [{block, size, content_size, delta, content, bases}],
    the entry's own rules checked (its sizes against the image are the reader's)."""
    out, last = [], -1
    for i in range(len(raw) // DELTA):
        e = raw[i * DELTA:(i + 1) * DELTA]
        block, size, csize, nbases = struct.unpack_from("<QIIB", e, 0)
        bases = [e[88:120], e[120:152]][:nbases]
        if (e[17:24] != bytes(7) or e[152:] != bytes(8) or nbases not in (1, 2) or
                (nbases == 1 and e[120:152] != bytes(32)) or not size or not csize or
                block >= count or block <= last):
            raise ValueError("delta entry %d" % i)
        out.append({"block": block, "size": size, "content_size": csize, "delta": e[24:56],
                    "content": e[56:88], "bases": bases})
        last = block
    return out


def parse(index):
    """The index's header fields and entries [(offset, stored, sha)], every rule checked
    (ValueError otherwise); version 2's delta entries under "deltas"."""
    if len(index) < HDR or index[:8] != MAGIC:
        raise ValueError("not an index")
    version, hashalg, size, tail, count = struct.unpack_from("<IIQQQ", index, 8)
    (csum, ndeltas) = struct.unpack_from("<QQ", index, 40)
    if version == 1 and ndeltas:
        raise ValueError("reserved bytes set")
    ndeltas = ndeltas if version == 2 else 0
    if version not in (1, 2) or hashalg != 1 or index[56:64] != bytes(8):
        raise ValueError("unknown version or hash, or reserved bytes set")
    body = HDR + ENTRY * count + SB + (size - tail)
    if len(index) != body + DELTA * ndeltas or tail > size:
        raise ValueError("length does not match")
    entries_raw = index[HDR:HDR + ENTRY * count]
    deltas_raw = index[body:]
    covered = index[:40] + entries_raw if version == 1 else \
        index[:40] + index[48:64] + entries_raw + deltas_raw
    if xxh3(covered) != csum:
        raise ValueError("checksum")
    entries, at = [], SB
    for i in range(count):
        off, stored, res = struct.unpack_from("<QII", entries_raw, i * ENTRY)
        if off != at or res:
            raise ValueError("entry %d" % i)
        entries.append((off, stored, entries_raw[i * ENTRY + 16:(i + 1) * ENTRY]))
        at = off + stored
    if at != tail:
        raise ValueError("entries do not end at the tail")
    return {"image_size": size, "tail_offset": tail, "entries": entries,
            "superblock": index[HDR + ENTRY * count:HDR + ENTRY * count + SB],
            "tail": index[HDR + ENTRY * count + SB:body],
            "deltas": parse_deltas(deltas_raw, count)}


def rebuild(index, blocks_dir):
    """The one-file image an index stands for, from the block files (checked)."""
    p = parse(index)
    out = bytearray(p["superblock"])
    for off, stored, sha in p["entries"]:
        with open(os.path.join(blocks_dir, block_name(sha)), "rb") as f:
            b = f.read()
        if hashlib.sha256(b).digest() != sha or len(b) != stored:
            raise ValueError("block %s" % block_name(sha))
        out += b
    return bytes(out + p["tail"])


if __name__ == "__main__":
    if len(sys.argv) < 5 or sys.argv[1] != "publish":
        sys.exit(__doc__)
    print(publish(sys.argv[2], sys.argv[3], sys.argv[4], *sys.argv[5:6]))
