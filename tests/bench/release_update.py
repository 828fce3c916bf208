#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""What an update from release v1 to release v2 of a real application costs to download
(issue 31), run by hand, as root, not in CI.

For each release pair (two unpacked trees) and each stipple build given, for the default
block size and the block sizes asked (the curve of image size against update bytes):

  image v1, v2      the images mkstipple makes of the two trees (its defaults, -b SIZE)
  whole             downloading v2 whole: v2's size
  stipple (blocks)  what a published v2 costs next to v1's blocks, computed from the images:
                    the index (stipple-publish layout: 64 + 48 N + 256 bytes + the tail)
                    plus the stored blocks of v2 whose SHA-256 no block of v1 has; checked
                    against the count `stipple diff --stat v1 v2` prints
  zsync (image)     zsyncmake (its defaults) on v2, then zsync with v1 as its seed, against
                    nginx on loopback: the bytes nginx sent (the .zsync file included)
  casync (image)    `casync make` of v1 then v2 (blob indexes, casync's defaults) into one
                    store: the bytes of the chunk files v2 added to it
  mount (today)     the one-file image over HTTP: mount v1's URL with a disk cache, read every
                    file, unmount; mount v2's URL with the same cache_dir, read every file;
                    the bytes nginx sent for v2, direct and through a squid on loopback
  deltas            when the build's publish has --base: v2 published with `--base v1`
                    into the DIR v1 was published in, what its summary says an update from
                    v1 fetches (update_bytes: the index, the delta files, the blocks with
                    no delta), and how long that publish took
  mount (published) when the build has `stipple publish`: v1 and v2 published into one DIR
                    served by nginx (blocks/ immutable, the index no-cache), v2 with
                    `--base v1` when the build has it, then as above

and once per pair:

  ideal             the files of v2 that are new or differ from v1 (same path, other bytes),
                    concatenated in path order and compressed solidly with
                    `zstd -19 --long=27 -T1`; or v2's image where that is smaller
  casync (trees)    `casync make --without=all` of the v1 tree then the v2 tree into one store:
                    the bytes of the chunk files v2 added

Images and per-pair figures are kept under WORK (keyed by the mkstipple binary's SHA-256
and the options), so a run that stops can be resumed and a second build reuses nothing
that is not its own. Prints a markdown table per pair and build, and appends them (with the
commits measured and the machine's load) to tests/bench/RESULTS.md unless --no-append.

usage (tests/bench/NOTES.md has the runs made):
  /usr/bin/python3 tests/bench/release_update.py --build build [--build OTHER/build ...]
      [--pairs /work/releases/pairs.txt] [--only python3.11,jdk17] [--sizes default,1,2,4]
      [--mount-sizes default] [--skip zsync,casync,ideal,mount,publish,deltas] [--work DIR]
  --build may be LABEL=DIR; --mkopts LABEL='OPTS' adds mkstipple options to that build's
  images; --v2-mkopts LABEL='OPTS' to its v2 images only, {v1} standing for v1's image
  (for a `mkstipple --base OLD.stp` layout). Such a build's table gets a last column, its
  v2 against the v2 of a build of the same run without them: the same DIR given twice,
  fresh=build base=build --v2-mkopts base='--base {v1}', compares the two layouts (the
  fresh images are shared with runs of the same mkstipple binary, by its hash).
"""

import argparse
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
import httputil  # noqa: E402 (tests/integration, on the path through benchlib)
from treeutil import _sha256 as sha256_file  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.realpath(os.path.join(HERE, "..", ".."))
MiB = 1 << 20
CURVE = ["default", "1", "2", "4", "8", "16", "32"]
ZSTD_IDEAL = ["zstd", "-19", "--long=27", "-T1", "-q", "-c"]


def log(msg):
    print("[%s] %s" % (time.strftime("%H:%M:%S"), msg), file=sys.stderr, flush=True)


def run(cmd, **kw):
    kw.setdefault("stdin", subprocess.DEVNULL)
    return subprocess.run(cmd, check=True, **kw)


def out(cmd, **kw):
    return run(cmd, capture_output=True, text=True, **kw).stdout


class Cache:
    """A JSON value per key, in WORK/figures: what took long is computed once."""

    def __init__(self, work):
        self.dir = os.path.join(work, "figures")
        os.makedirs(self.dir, exist_ok=True)

    def get(self, key, compute):
        path = os.path.join(self.dir, re.sub(r"[^A-Za-z0-9._+-]", "_", key) + ".json")
        if os.path.exists(path):
            with open(path) as f:
                return json.load(f)
        value = compute()
        with open(path + ".tmp", "w") as f:
            json.dump(value, f, indent=1)
        os.rename(path + ".tmp", path)
        return value


# ---- builds ----------------------------------------------------------------------------

class Build:
    def __init__(self, label, path, mkopts, v2opts):
        self.path = os.path.realpath(path)
        self.mk = os.path.join(self.path, "builder", "mkstipple")
        self.st = os.path.join(self.path, "mounthelper", "stipple")
        for b in (self.mk, self.st):
            if not os.access(b, os.X_OK):
                sys.exit("release_update: no %s (build it: meson setup %s && ninja -C %s)"
                         % (b, path, path))
        self.mkopts, self.v2opts = shlex.split(mkopts), shlex.split(v2opts)
        self.src = os.path.dirname(self.path)
        self.commit = self._commit()
        self.label = label or self.commit
        self.tag = sha256_file(self.mk)[:12]
        self.mount_tag = hashlib.sha256("".join(sha256_file(os.path.join(
            self.path, "mounthelper", p)) for p in ("stipple", "stipple-fetcher",
                                                    "stipple-mountd")).encode()).hexdigest()[:12]
        # v1's images do not depend on v2's options: builds that differ only there share them
        self.v1_tag = self.tag
        if self.mkopts:
            self.v1_tag += "-" + hashlib.sha256(repr((self.mkopts, [])).encode()).hexdigest()[:8]
        if self.mkopts or self.v2opts:
            self.tag += "-" + hashlib.sha256(repr((self.mkopts, self.v2opts)).encode()).hexdigest()[:8]
        helptext = out([self.mk, "--help"])
        m = re.search(r"--block-size SIZE.*\(default (\d+)([KMG])\)", helptext)
        self.default_mib = (int(m.group(1)) * {"K": 1 / 1024, "M": 1, "G": 1024}[m.group(2)]
                            if m else None)
        self.has_publish = "publish" in subprocess.run(
            [self.st, "--help"], capture_output=True, text=True).stdout
        self.has_deltas = self.has_publish and "--base" in subprocess.run(
            [self.st, "publish", "--help"], capture_output=True, text=True).stdout

    def _commit(self):
        """The source's commit; a copied build dir says it in a file COMMIT."""
        saved = os.path.join(self.path, "COMMIT")
        if os.path.exists(saved):
            with open(saved) as f:
                return f.read().strip()
        try:
            c = out(["git", "-C", self.src, "rev-parse", "--short=7", "HEAD"]).strip()
            dirty = out(["git", "-C", self.src, "status", "--porcelain", "--untracked-files=no",
                         "--", "builder", "common", "mounthelper"]).strip()
            product = out(["git", "-C", self.src, "log", "-1", "--format=%h", "--abbrev=7",
                           "--", "builder", "common", "mounthelper"]).strip()
            return c + ("+dirty" if dirty else "") + (
                " (product code as of %s)" % product if product != c else "")
        except subprocess.CalledProcessError:
            return "unknown"

    def describe(self):
        s = "%s (%s, commit %s" % (self.label, self.path, self.commit)
        if self.mkopts or self.v2opts:
            s += ", mkstipple %s / v2 %s" % (" ".join(self.mkopts), " ".join(self.v2opts))
        return s + ")"

    def image(self, work, pair, which, size):
        """The image of PAIR's WHICH (0: v1, 1: v2) tree at block SIZE ("default" or MiB),
        built when missing."""
        if size == "default" and self.default_mib is not None and self.default_mib >= 1:
            size = "%d" % self.default_mib
        label, tree = pair.versions[which]
        d = os.path.join(work, "img", self.v1_tag if which == 0 else self.tag, pair.name)
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, "%s-b%sM.stp" % (label, size) if size != "default"
                            else "%s-bdefault.stp" % label)
        if os.path.exists(path):
            return path
        args = [] if size == "default" else ["-b", "%sM" % size]
        args += self.mkopts
        if which == 1:
            v1 = self.image(work, pair, 0, size)
            args += [a.replace("{v1}", v1) for a in self.v2opts]
        log("mkstipple %s %s -> %s" % (" ".join(args), tree, path))
        t0 = time.monotonic()
        run(["nice", "-n", "10", self.mk, "-q"] + args + [tree, path + ".tmp"])
        os.rename(path + ".tmp", path)
        log("  %.0f s, %d bytes" % (time.monotonic() - t0, os.path.getsize(path)))
        return path


class Pair:
    def __init__(self, name, v1label, v1, v2label, v2):
        self.name = name
        self.versions = [(v1label, v1), (v2label, v2)]


def read_pairs(path, only):
    base = os.path.dirname(os.path.realpath(path))
    pairs = []
    with open(path) as f:
        for line in f:
            fields = line.split("#", 1)[0].split()
            if not fields:
                continue
            if len(fields) != 5:
                sys.exit("release_update: %s: want NAME V1LABEL V1DIR V2LABEL V2DIR: %r"
                         % (path, line))
            name, l1, d1, l2, d2 = fields
            d1, d2 = (os.path.join(base, d) for d in (d1, d2))
            if only and name not in only:
                continue
            for d in (d1, d2):
                if not os.path.isdir(d):
                    sys.exit("release_update: %s: no directory %s" % (path, d))
            pairs.append(Pair(name, l1, d1, l2, d2))
    return pairs


# ---- per-pair figures -----------------------------------------------------------------

def same_bytes(a, b):
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            x, y = fa.read(1 << 20), fb.read(1 << 20)
            if x != y:
                return False
            if not x:
                return True


def ideal(pair):
    """The new and changed regular files of v2, solidly compressed."""
    (_, t1), (_, t2) = pair.versions
    f1, f2 = benchlib.file_sizes(t1), benchlib.file_sizes(t2)
    changed = sorted(p for p, s in f2.items()
                     if f1.get(p) != s or not same_bytes(os.path.join(t1, p), os.path.join(t2, p)))
    raw = sum(f2[p] for p in changed)
    log("%s: %d of %d files new or changed (%d bytes); %s" % (
        pair.name, len(changed), len(f2), raw, " ".join(ZSTD_IDEAL)))
    z = subprocess.Popen(["nice", "-n", "10"] + ZSTD_IDEAL, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE)
    counted = [0]

    def drain():
        while True:
            b = z.stdout.read(1 << 20)
            if not b:
                return
            counted[0] += len(b)
    import threading
    t = threading.Thread(target=drain)
    t.start()
    for p in changed:
        with open(os.path.join(t2, p), "rb") as f:
            shutil.copyfileobj(f, z.stdin, 1 << 20)
    z.stdin.close()
    t.join()
    if z.wait() != 0:
        raise RuntimeError("zstd failed")
    return {"files_v1": len(f1), "files_v2": len(f2), "bytes_v1": sum(f1.values()),
            "bytes_v2": sum(f2.values()), "changed_files": len(changed),
            "changed_bytes": raw, "zstd_bytes": counted[0],
            "removed_files": len(set(f1) - set(f2)), "zstd": " ".join(ZSTD_IDEAL)}


def store_chunks(store):
    """{chunk file name: size} of a casync store."""
    chunks = {}
    for d, _, names in os.walk(store):
        for n in names:
            if n.endswith(".cacnk"):
                chunks[n] = os.path.getsize(os.path.join(d, n))
    return chunks


def casync_pair(work, v1, v2, what):
    """casync make of V1 then V2 into one store: what V2 added. WHAT: extra arguments."""
    tmp = tempfile.mkdtemp(prefix="casync-", dir=work)
    try:
        store = os.path.join(tmp, "store")
        ext = "caidx" if os.path.isdir(v1) else "caibx"
        run(["nice", "-n", "10", "casync", "make", "--store=" + store] + what
            + [os.path.join(tmp, "v1." + ext), v1], capture_output=True)
        before = store_chunks(store)
        run(["nice", "-n", "10", "casync", "make", "--store=" + store] + what
            + [os.path.join(tmp, "v2." + ext), v2], capture_output=True)
        after = store_chunks(store)
        new = {n: s for n, s in after.items() if n not in before}
        return {"chunks_v1": len(before), "chunks_new": len(new), "new_bytes": sum(new.values()),
                "store_bytes_v1": sum(before.values())}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ---- per-image figures ----------------------------------------------------------------

def image_blocks(build, image):
    """The image's summary and [(sha256, stored size)] of its blocks, hashed here from
    the offsets `stipple info --blocks --json` gives."""
    info = json.loads(out([build.st, "info", "--blocks", "--json", image]))
    blocks = []
    with open(image, "rb") as f:
        for b in info["block_table"]:
            f.seek(b["offset"])
            data = f.read(b["stored"])
            blocks.append((hashlib.sha256(data).hexdigest(), b["stored"]))
    tail = max((b["offset"] + b["stored"] for b in info["block_table"]), default=256)
    return info, blocks, tail


def stipple_figures(build, v1, v2):
    i1, b1, _ = image_blocks(build, v1)
    i2, b2, tail2 = image_blocks(build, v2)
    have = {h for h, _ in b1}
    new, seen = 0, set()
    for h, s in b2:
        if h not in have and h not in seen:
            new += s
        seen.add(h)
    index = 64 + 48 * len(b2) + 256 + (i2["image_size"] - tail2)
    stat = subprocess.run([build.st, "diff", "--stat", v1, v2], capture_output=True, text=True)
    m = re.search(r"B shares (\d+) with A", stat.stdout)
    return {"size_v1": os.path.getsize(v1), "size_v2": os.path.getsize(v2),
            "blocks_v1": len(b1), "blocks_v2": len(b2),
            "shared_blocks": sum(1 for h, _ in b2 if h in have),
            "diff_stat_shared": int(m.group(1)) if m else None,
            "diff_stat_line": (stat.stdout.strip().splitlines() or [""])[-1],
            "index_v2": index, "new_block_bytes": new, "update_bytes": index + new,
            "block_size": i2["block_size"], "features_v2": i2["features"]}


class Origin:
    """nginx on loopback (tests/integration/httputil.py's) serving WORK/http/www: /img/
    one-file images, /pub/KEY/ published ones with the README's caching lines: blocks/
    immutable, the indexes revalidated."""

    def __init__(self, work):
        self.dir = tempfile.mkdtemp(prefix="http-", dir=work)  # runs side by side
        self.www = os.path.join(self.dir, "www")
        os.makedirs(self.www, exist_ok=True)
        self.ctx = httputil.published_origin(self.www, self.dir, "pub/[^/]+", pattern=True)
        self.nginx = self.ctx.__enter__()
        self.log = self.nginx.access_log

    def url(self, rel):
        return self.nginx.url(rel)

    def mark(self):
        return os.path.getsize(self.log)

    def sent_since(self, mark):
        """(bytes of bodies sent, requests) since MARK."""
        with open(self.log) as f:
            f.seek(mark)
            lines = [l.split() for l in f.read().splitlines() if l.strip()]
        return sum(int(l[2]) for l in lines), len(lines)

    def stop(self):
        self.ctx.__exit__(None, None, None)
        benchlib.safe_rmtree(self.dir, "release_update")


class Proxy:
    """squid on loopback (tests/integration/httputil.py's config, with the README's
    refresh_pattern lines), in a directory of its user's."""

    def __init__(self, work):
        self.dirs = httputil.proxy_dir(work)
        self.dir = self.dirs.__enter__()
        self.ctx = httputil.squid(self.dir, refresh=httputil.readme_caching("pub")[1])
        self.url = self.ctx.__enter__()
        self.log = os.path.join(self.dir, "access.log")

    def mark(self):
        return os.path.getsize(self.log) if os.path.exists(self.log) else 0

    def sent_since(self, mark):
        """Bytes squid sent its clients (the reply sizes it logs, headers included)."""
        time.sleep(0.5)  # squid logs a request when it has ended
        if not os.path.exists(self.log):
            return 0
        with open(self.log) as f:
            f.seek(mark)
            return sum(int(l.split()[4]) for l in f.read().splitlines() if len(l.split()) > 4)

    def stop(self):
        self.ctx.__exit__(None, None, None)
        self.dirs.__exit__(None, None, None)


def zsync_fetch(origin, v1, v2, tag):
    d = os.path.join(origin.www, "img", tag)
    os.makedirs(d, exist_ok=True)
    served = os.path.join(d, "v2.stp")
    shutil.copyfile(v2, served)
    run(["nice", "-n", "10", "zsyncmake", "-o", served + ".zsync", "-u", "v2.stp", served],
        capture_output=True, cwd=d)
    outdir = tempfile.mkdtemp(prefix="zsync-", dir=os.path.dirname(origin.dir))
    try:
        mark = origin.mark()
        r = run(["nice", "-n", "10", "zsync", "-i", v1, "-o", os.path.join(outdir, "out"),
                 origin.url("img/%s/v2.stp.zsync" % tag)], capture_output=True, text=True,
                cwd=outdir)
        sent, reqs = origin.sent_since(mark)
        if sha256_file(os.path.join(outdir, "out")) != sha256_file(v2):
            raise RuntimeError("zsync did not rebuild %s" % v2)
        m = re.search(r"used (\d+) local, fetched (\d+)", r.stdout + r.stderr)
        return {"nginx_bytes": sent, "requests": reqs,
                "control_bytes": os.path.getsize(served + ".zsync"),
                "zsync_says_fetched": int(m.group(2)) if m else None}
    finally:
        shutil.rmtree(outdir, ignore_errors=True)
        shutil.rmtree(d, ignore_errors=True)


def mount_update(build, work, origin, url1, url2, proxy, mount_opts):
    """Mount URL1 with a fresh disk cache, read it all; then URL2 with the same cache:
    what the origin (and squid) sent for URL2."""
    tmp = tempfile.mkdtemp(prefix="mnt-", dir=work)
    mnt = os.path.join(tmp, "mnt")
    os.makedirs(mnt)
    opts = "cache_dir=%s/cache" % tmp + ("," + mount_opts if mount_opts else "")
    if proxy:
        opts += ",proxy=" + proxy.url
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    res = {}
    try:
        for which, url in (("v1", url1), ("v2", url2)):
            m, pm = origin.mark(), proxy.mark() if proxy else 0
            t0 = time.monotonic()
            run([build.st, "mount", "-o", opts, url, mnt], env=env)
            try:
                res[which + "_read"] = benchlib.read_all(mnt)
            finally:
                benchlib.unmount(mnt)
            res[which + "_seconds"] = round(time.monotonic() - t0, 1)
            res[which + "_origin"], res[which + "_requests"] = origin.sent_since(m)
            if proxy:
                res[which + "_via_squid"] = proxy.sent_since(pm)
        return res
    finally:
        benchlib.safe_rmtree(tmp, "release_update")


def publish(build, image, pubdir, name, base=None):
    """`stipple publish [--base BASE] IMAGE DIR`, IMAGE seen as NAME.stp (the index takes
    its name): its --json summary."""
    named = os.path.join(os.path.dirname(pubdir), name + ".stp")
    os.link(image, named)
    try:
        return json.loads(run([build.st, "publish", "--json", "-q", *(
            ["--base", base] if base else []), named, pubdir], capture_output=True).stdout)
    finally:
        os.unlink(named)


def delta_figures(build, work, v1, v2, key):
    """v1 then v2 with --base v1 published into a scratch DIR: what an update fetches."""
    pub = os.path.join(work, "deltas", key)
    shutil.rmtree(pub, ignore_errors=True)
    os.makedirs(pub)
    try:
        publish(build, v1, pub, "v1")
        t = time.time()
        doc = publish(build, v2, pub, "v2", base=v1)
        return {"update_bytes": doc["update_bytes"], "deltas": doc["deltas"],
                "delta_bytes": doc["delta_bytes"], "seconds": round(time.time() - t, 1)}
    finally:
        shutil.rmtree(pub, ignore_errors=True)


# ---- the run ---------------------------------------------------------------------------

def measure(args, builds, pairs):
    cache = Cache(args.work)
    skip = set(args.skip.split(",")) if args.skip else set()
    origin = Origin(args.work) if not ({"zsync", "mount"} <= skip) else None
    results = []
    try:
        for pair in pairs:
            (l1, t1), (l2, t2) = pair.versions
            pr = {"pair": pair, "builds": []}
            if "ideal" not in skip:
                pr["ideal"] = cache.get("ideal-%s" % pair.name, lambda: ideal(pair))
            if "casync" not in skip:
                log("%s: casync over the trees" % pair.name)
                pr["casync_tree"] = cache.get("casync-tree-%s" % pair.name, lambda: casync_pair(
                    args.work, t1, t2, ["--without=all"]))
            for b in builds:
                rows = []
                for size in args.sizes.split(","):
                    v1, v2 = b.image(args.work, pair, 0, size), b.image(args.work, pair, 1, size)
                    key = "%s-%s-%s" % (b.tag, pair.name, os.path.basename(v2))
                    row = {"size": size}
                    row.update(stipple_figures(b, v1, v2))
                    if "zsync" not in skip:
                        log("%s %s: zsync over the images" % (pair.name, size))
                        row["zsync"] = cache.get("zsync-" + key, lambda: zsync_fetch(
                            origin, v1, v2, key))
                    if "casync" not in skip:
                        log("%s %s: casync over the images" % (pair.name, size))
                        row["casync_image"] = cache.get("casync-img-" + key, lambda: casync_pair(
                            args.work, v1, v2, []))
                    if b.has_deltas and "deltas" not in skip:
                        log("%s %s: publish --base" % (pair.name, size))
                        row["deltas"] = cache.get("deltas-" + key, lambda: delta_figures(
                            b, args.work, v1, v2, key))
                    if "mount" not in skip and size in args.mount_sizes.split(","):
                        row.update(cache.get("mount-%s-%s-%s" % (
                            b.mount_tag, "publish" in skip, key), lambda: mounts(
                                args, b, origin, pair, v1, v2, key, skip)))
                    rows.append(row)
                pr["builds"].append((b, rows))
            results.append(pr)
    finally:
        if origin:
            origin.stop()
    return results


def mounts(args, b, origin, pair, v1, v2, key, skip):
    row = {}
    d = os.path.join(origin.www, "img", key)
    os.makedirs(d, exist_ok=True)
    for name, img in (("v1.stp", v1), ("v2.stp", v2)):
        shutil.copyfile(img, os.path.join(d, name))
    urls = [origin.url("img/%s/%s" % (key, n)) for n in ("v1.stp", "v2.stp")]
    kinds = [("today", urls)]
    if b.has_publish and "publish" not in skip:
        pub = os.path.join(origin.www, "pub", key)
        shutil.rmtree(pub, ignore_errors=True)
        os.makedirs(pub)
        publish(b, v1, pub, "v1")
        publish(b, v2, pub, "v2", base=v1 if b.has_deltas else None)
        kinds.append(("published", [origin.url("pub/%s/%s" % (key, n))
                                    for n in ("v1.stp", "v2.stp")]))
    try:
        for kind, (u1, u2) in kinds:
            log("%s: mount %s, direct" % (key, kind))
            row["mount_" + kind] = mount_update(b, args.work, origin, u1, u2, None,
                                                args.mount_opts)
            log("%s: mount %s, through squid" % (key, kind))
            proxy = Proxy(args.work)
            try:
                row["mount_%s_squid" % kind] = mount_update(b, args.work, origin, u1, u2, proxy,
                                                            args.mount_opts)
            finally:
                proxy.stop()
    finally:
        shutil.rmtree(d, ignore_errors=True)
        shutil.rmtree(os.path.join(origin.www, "pub", key), ignore_errors=True)
    return row


def human(n):
    if n is None:
        return "-"
    for unit, div in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= div:
            return "%.1f %s" % (n / div, unit) if n / div < 100 else "%.0f %s" % (n / div, unit)
    return "%d B" % n


def pct(n, whole):
    return "%s (%.0f%%)" % (human(n), 100.0 * n / whole) if n is not None and whole else human(n)


def report(results, builds):
    lines = []
    for pr in results:
        pair = pr["pair"]
        (l1, t1), (l2, t2) = pair.versions
        lines.append("### %s %s -> %s" % (pair.name, l1, l2))
        lines.append("")
        idl = pr.get("ideal")
        if idl:
            lines.append("Trees: %d files, %s -> %d files, %s; %d files new or changed in v2 (%s), "
                         "%d removed." % (idl["files_v1"], human(idl["bytes_v1"]), idl["files_v2"],
                                          human(idl["bytes_v2"]), idl["changed_files"],
                                          human(idl["changed_bytes"]), idl["removed_files"]))
            lines.append("Ideal (new and changed files, `%s`): %s." % (
                idl["zstd"].replace(" -q -c", ""), human(idl["zstd_bytes"])))
        ct = pr.get("casync_tree")
        if ct:
            lines.append("casync over the trees (`--without=all`, shared store): v2 adds %d "
                         "chunks, %s (v1's store: %d chunks, %s)." % (
                             ct["chunks_new"], human(ct["new_bytes"]), ct["chunks_v1"],
                             human(ct["store_bytes_v1"])))
        lines.append("")
        for b, rows in pr["builds"]:
            lines.append("Build %s; layout of v2: %s." % (
                b.describe(), ", ".join(rows[0]["features_v2"]) if rows else "-"))
            lines.append("")
            plain = fresh_sizes(pr, b)
            hdr = ["block", "image v1", "image v2 = whole", "blocks shared", "stipple update "
                   "(index + new blocks)", "ideal (min with v2)", "update / ideal",
                   "zsync (image)", "casync (image)", "casync (trees)"] + \
                (["v2 against a fresh v2"] if plain else []) + \
                (["with deltas (publish --base; its time)"] if any("deltas" in r for r in rows)
                 else [])
            lines.append("| " + " | ".join(hdr) + " |")
            lines.append("|" + "---|" * len(hdr))
            for r in rows:
                v2 = r["size_v2"]
                ideal_b = min(idl["zstd_bytes"], v2) if idl else None
                z = r.get("zsync", {}).get("nginx_bytes")
                ci = r.get("casync_image", {}).get("new_bytes")
                shared = "%d / %d" % (r["shared_blocks"], r["blocks_v2"])
                if r["diff_stat_shared"] is not None and r["diff_stat_shared"] != r["shared_blocks"]:
                    shared += " (diff --stat: %d)" % r["diff_stat_shared"]
                size = "%s (%g MiB)" % (r["size"], r["block_size"] / MiB) \
                    if r["size"] == "default" else "%s MiB" % r["size"]
                lines.append("| " + " | ".join([
                    size, human(r["size_v1"]), human(v2), shared, pct(r["update_bytes"], v2),
                    pct(ideal_b, v2), "%.2fx" % (r["update_bytes"] / ideal_b) if ideal_b else "-",
                    pct(z, v2), pct(ci, v2), pct(ct["new_bytes"], v2) if ct else "-"] + (
                        ["%+.1f%%" % (100.0 * v2 / plain[r["size"]] - 100)
                         if r["size"] in plain else "-"] if plain else []) + (
                        ["%s (%d deltas; %s s)" % (pct(r["deltas"]["update_bytes"], v2),
                                                   r["deltas"]["deltas"], r["deltas"]["seconds"])]
                        if "deltas" in r else [])) + " |")
            lines.append("")
            for r in rows:
                for kind in ("today", "published"):
                    m, ms = r.get("mount_" + kind), r.get("mount_%s_squid" % kind)
                    if not m:
                        continue
                    lines.append(
                        "Mounted over HTTP (%s, block %s), v1 read whole then v2 with the same "
                        "disk cache: nginx sent %s for v2 (%d requests, %s s; v1: %s); through "
                        "squid: nginx sent %s for v2, squid sent the client %s." % (
                            "one-file image" if kind == "today" else "published index + blocks",
                            r["size"], pct(m["v2_origin"], r["size_v2"]), m["v2_requests"],
                            m["v2_seconds"], human(m["v1_origin"]),
                            pct(ms["v2_origin"], r["size_v2"]) if ms else "-",
                            human(ms.get("v2_via_squid")) if ms else "-"))
            lines.append("")
    return "\n".join(lines)


def fresh_sizes(pr, b):
    """For a build whose v2 has options of its own (--base {v1}): {size: v2's size} of
    the first build of the run without them, to show what the layout costs; else {}."""
    if not b.v2opts:
        return {}
    for other, rows in pr["builds"]:
        if not other.v2opts and other.mkopts == b.mkopts:
            return {r["size"]: r["size_v2"] for r in rows}
    return {}


def machine_note():
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    return "%d CPUs, load average %s" % (os.cpu_count(), load)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", action="append", default=[],
                    help="a stipple build dir, or LABEL=DIR (repeatable; default: REPO/build)")
    ap.add_argument("--mkopts", action="append", default=[], help="LABEL='mkstipple options'")
    ap.add_argument("--v2-mkopts", action="append", default=[],
                    help="LABEL='options for v2 only', {v1} = v1's image")
    ap.add_argument("--pairs", default="/work/releases/pairs.txt")
    ap.add_argument("--only", default="", help="pair names, comma-separated")
    ap.add_argument("--sizes", default=",".join(CURVE),
                    help="block sizes in MiB, and 'default' (default: %(default)s)")
    ap.add_argument("--mount-sizes", default="default",
                    help="the block sizes measured through real mounts")
    ap.add_argument("--mount-opts", default="", help="more -o options for the mounts")
    ap.add_argument("--skip", default="", help="of ideal,casync,zsync,mount,publish")
    ap.add_argument("--work", default="/work/releases/work")
    ap.add_argument("--results", default=os.path.join(HERE, "RESULTS.md"))
    ap.add_argument("--no-append", action="store_true")
    args = ap.parse_args()
    if os.geteuid() != 0 and "mount" not in args.skip:
        sys.exit("release_update: the mounts need root (or --skip mount)")
    os.makedirs(args.work, exist_ok=True)
    opts = dict(o.split("=", 1) for o in args.mkopts)
    v2opts = dict(o.split("=", 1) for o in args.v2_mkopts)
    builds = []
    for spec in args.build or [os.path.join(REPO, "build")]:
        label, path = spec.split("=", 1) if "=" in spec else ("", spec)
        builds.append(Build(label, path, opts.get(label, ""), v2opts.get(label, "")))
    pairs = read_pairs(args.pairs, set(filter(None, args.only.split(","))))
    load0 = machine_note()
    t0 = time.monotonic()
    results = measure(args, builds, pairs)
    text = ("## Release updates (issue 31): %s\n\n" % time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
            + "tests/bench/release_update.py %s\n" % " ".join(shlex.quote(a) for a in sys.argv[1:])
            + "Machine: %s at the start, %s at the end (%.0f min); shared, so build times are "
              "not reported. Tools: %s, %s, %s.\n\n" % (
                load0, machine_note(), (time.monotonic() - t0) / 60,
                out(["zstd", "--version"]).strip().strip("* ").split(",")[0],
                out(["casync", "--version"]).strip().splitlines()[0],
                (out(["zsync", "-V"]) or "zsync").strip().splitlines()[0])
            + report(results, builds))
    print(text)
    if not args.no_append:
        with open(args.results, "a") as f:
            f.write("\n" + text + "\n")


if __name__ == "__main__":
    main()
