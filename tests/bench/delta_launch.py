"""Launch straight away from an updated release rebuilt from deltas (issue 31): two builds
(OLD_BUILD, NEW_BUILD) interleaved, ROUNDS rounds, release 2 of a pair published with
`stipple publish --base` (PUB: the published directory, V1/V2 its index names; JDK 17 by
default: java -version, then javac of a one-line class) served by nginx on loopback:
(a) a fresh store; (b) through release 1's store (a copy of a template a v1 mount filled),
launch then every file read; (b2) a second mount of release 2 on that same store. Each
case also times its `stipple mount` command ("mount").
Prints each time and a JSON of medians. Needs root; leaves no mount or nginx.
RATE (nginx's limit_rate, say 12500k for 100 Mbit/s) slows each of the origin's
connections to that rate, as a link would. NODELTAS=1 adds (c): through a copy of release
1's store as (b), mounted with -o nodeltas (both builds must know it).
usage: OLD_BUILD=... NEW_BUILD=... [PUB=... V1=... V2=... W=... RATE=... NODELTAS=1] python3 delta_launch.py"""
import os, sys, time, shutil, subprocess, statistics, json
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import httputil
from conftest import is_mounted, unmount

W = os.environ.get("W", "/var/tmp/delta_launch")
BUILDS = {"old": os.environ["OLD_BUILD"], "new": os.environ["NEW_BUILD"]}
PUB = os.environ.get("PUB", "/var/tmp/delta/pubjdk")
V1 = os.environ.get("V1", "17.0.19-b32M.stp")
V2 = os.environ.get("V2", "17.0.21.1-b32M.stp")
JAVA = "usr/lib/jvm/java-17-openjdk-amd64/bin/"
ROUNDS = int(os.environ.get("ROUNDS", "3"))
os.makedirs(W + "/www", exist_ok=True)
if not os.path.exists(W + "/www/repo"):
    os.symlink(PUB, W + "/www/repo")
with open(W + "/Hello.java", "w") as f:
    f.write("public class Hello { public static void main(String[] a) { System.out.println(\"hi\"); } }\n")


def mount(build, url, cache, opts=""):
    mnt = W + "/mnt"
    os.makedirs(mnt, exist_ok=True)
    t = time.monotonic()
    r = subprocess.run([BUILDS[build] + "/mounthelper/stipple", "mount", "-o",
                        "cache_dir=" + cache + opts, url, mnt], capture_output=True, text=True,
                       timeout=120)
    took = time.monotonic() - t
    assert r.returncode == 0, r.stderr
    while not is_mounted(mnt):
        time.sleep(0.05)
    return mnt, took


def timed(cmd):
    t = time.monotonic()
    subprocess.run(cmd, check=True, capture_output=True, timeout=600)
    return time.monotonic() - t


def launch(mnt):
    java = timed([mnt + "/" + JAVA + "java", "-version"])
    javac = timed([mnt + "/" + JAVA + "javac", "-d", W + "/out", W + "/Hello.java"])
    return java, javac


def read_all(mnt):
    t = time.monotonic()
    for d, _, files in os.walk(mnt):
        for n in files:
            p = os.path.join(d, n)
            if os.path.isfile(p) and not os.path.islink(p):
                with open(p, "rb") as f:
                    while f.read(1 << 20):
                        pass
    return time.monotonic() - t


def du(path):
    return int(subprocess.run(["du", "-sb", path], capture_output=True, text=True).stdout.split()[0])


res = {}
def note(key, v):
    res.setdefault(key, []).append(v)
    print(key, "%.2f" % v, flush=True)

def run_all():
    with httputil.published_origin(W + "/www", W + "/nginx", "repo",
                                   rate=os.environ.get("RATE")) as origin:
        v1, v2 = origin.url("repo/" + V1), origin.url("repo/" + V2)
        tmpl = W + "/store-v1"
        if not os.path.exists(tmpl + "/blocks"):
            m, _ = mount("new", v1, tmpl)
            read_all(m)
            unmount(m)
        for r in range(ROUNDS):
            for build in (["old", "new"] if r % 2 == 0 else ["new", "old"]):
                print("round", r, build, "load", open("/proc/loadavg").read().split()[0], flush=True)
                fresh = W + "/store-fresh"
                shutil.rmtree(fresh, ignore_errors=True)
                m, t = mount(build, v2, fresh)
                note(build + " a mount", t)
                j, c = launch(m)
                unmount(m)
                note(build + " a java", j); note(build + " a javac", c)
                st = W + "/store-b"
                shutil.rmtree(st, ignore_errors=True)
                shutil.copytree(tmpl, st, symlinks=True)
                m, t = mount(build, v2, st)
                note(build + " b mount", t)
                j, c = launch(m)
                note(build + " b java", j); note(build + " b javac", c)
                note(build + " b read-all", read_all(m))
                unmount(m)
                m, t = mount(build, v2, st)
                note(build + " b2 mount", t)
                j, c = launch(m)
                note(build + " b2 java", j); note(build + " b2 javac", c)
                note(build + " b2 read-all", read_all(m))
                unmount(m)
                note(build + " store MB", du(st) / 1e6)
                if os.environ.get("NODELTAS"):
                    shutil.rmtree(st, ignore_errors=True)
                    shutil.copytree(tmpl, st, symlinks=True)
                    m, t = mount(build, v2, st, ",nodeltas")
                    note(build + " c mount", t)
                    j, c = launch(m)
                    unmount(m)
                    note(build + " c java", j); note(build + " c javac", c)
                note(build + " load", float(open("/proc/loadavg").read().split()[0]))


try:
    run_all()
finally:
    unmount(W + "/mnt")  # after a failure too
print(json.dumps({k: [statistics.median(v), v] for k, v in sorted(res.items())}, indent=1))
