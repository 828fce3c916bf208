# SPDX-License-Identifier: MIT
"""Web servers for the HTTP tests, on loopback only: nginx as an origin (its own config,
logs and temporary directories under the test's tmp_path, a free port), Squid as a
caching proxy in front of it, and a fault-injecting front written here. Each is a context
manager that stops what it started."""

import contextlib
import http.server
import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time

import pytest

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
SQUID = shutil.which("squid") or "/usr/sbin/squid"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port, proc, what, timeout=20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError("%s exited %s before listening" % (what, proc.returncode))
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError("%s did not listen on %d" % (what, port))


def stop(proc):
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Nginx:
    def __init__(self, root, port, log):
        self.root, self.port, self.access_log = root, port, log

    scheme = "http"

    def url(self, name):
        return "%s://127.0.0.1:%d/%s" % (self.scheme, self.port, name)

    def log_entries(self):
        """(method, status, body bytes, range header, protocol) of each request so far."""
        out = []
        with open(self.access_log) as f:
            for line in f:
                m = re.match(r'(\S+) (\d+) (\d+) "(.*)" (\S+)', line)
                if m:
                    out.append((m.group(1), int(m.group(2)), int(m.group(3)), m.group(4),
                                m.group(5)))
        return out

    def uris(self):
        """(method, status, body bytes, path) of each request so far."""
        with open(self.access_log[:-len("access.log")] + "uris.log") as f:
            return [(m, int(st), int(b), u) for m, st, b, u in
                    (line.split() for line in f if len(line.split()) == 4)]

    def bytes_sent(self):
        return sum(e[2] for e in self.log_entries())


@contextlib.contextmanager
def nginx(root, workdir, tls=None, location="", server=""):
    """nginx serving ROOT (read-only) on 127.0.0.1, with everything else in WORKDIR. TLS:
    (certificate, key) files: HTTPS with HTTP/2 on the same port. LOCATION: directives
    for `location /` (auth_basic, say); SERVER: more for the server (other locations).
    Each request's path is logged too (Nginx.uris)."""
    if not os.access(NGINX, os.X_OK):
        pytest.skip("nginx is not installed (apt-get install nginx-light)")
    workdir = os.fspath(workdir)
    os.makedirs(workdir, exist_ok=True)
    port = free_port()
    log = os.path.join(workdir, "access.log")
    conf = os.path.join(workdir, "nginx.conf")
    temps = "".join("  %s_temp_path %s/%s;\n" % (t, workdir, t)
                    for t in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    with open(conf, "w") as f:
        f.write("""daemon off;
master_process off;
worker_processes 1;
user root;
pid %(w)s/nginx.pid;
error_log %(w)s/error.log;
events { worker_connections 512; }
http {
  log_format counted '$request_method $status $body_bytes_sent "$http_range" $server_protocol';
  access_log %(log)s counted;
  log_format uris '$request_method $status $body_bytes_sent $uri';
  access_log %(w)s/uris.log uris;
%(temps)s  keepalive_requests 100000;
  server {
    listen 127.0.0.1:%(port)d%(ssl)s;
%(certs)s    root %(root)s;
    location / { %(location)s }
%(server)s
  }
}
""" % {"w": workdir, "log": log, "temps": temps, "port": port, "root": os.fspath(root),
                "ssl": " ssl http2" if tls else "", "location": location, "server": server,
                "certs": "    ssl_certificate %s;\n    ssl_certificate_key %s;\n" % tls if tls else ""})
    proc = subprocess.Popen([NGINX, "-c", conf, "-p", workdir], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=open(os.path.join(workdir, "stderr"), "w"))
    try:
        wait_listening(port, proc, "nginx")
        n = Nginx(root, port, log)
        if tls:
            n.scheme = "https"
        yield n
    finally:
        stop(proc)


README = os.path.join(os.path.dirname(__file__), "..", "..", "README.md")


def readme_caching(repo, pattern=False):
    """The README's caching lines for releases published in /REPO/: (the nginx locations,
    Squid's refresh_pattern lines). The tests and benchmarks serve what users are told to.
    PATTERN: REPO is a regular expression (pub/[^/]+: a directory per pair), and the
    README's prefix location becomes the same location as a regular expression."""
    with open(README) as f:
        text = f.read()
    sec = text[text.index("### Mounting a published release"):]
    nginx_conf = re.search(r"```nginx\n(.*?)```", sec, re.S).group(1)
    refresh = re.search(r"```\n(refresh_pattern.*?)```", sec, re.S).group(1)
    assert "immutable" in nginx_conf and "no-cache" in nginx_conf, nginx_conf
    if pattern:
        nginx_conf = nginx_conf.replace("location /REPO/", "location ~ ^/REPO/")
    return nginx_conf.replace("/REPO/", "/%s/" % repo), refresh


@contextlib.contextmanager
def published_origin(www, workdir, repo, pattern=False, rate=None):
    """nginx serving WWW, releases published in WWW/REPO with the README's caching lines
    (readme_caching). RATE: nginx's limit_rate for each connection (a benchmark's link)."""
    nginx_conf, _ = readme_caching(repo, pattern)
    if rate:
        nginx_conf += "\nlimit_rate %s;\n" % rate
    with nginx(www, workdir, server=nginx_conf) as n:
        yield n


def self_signed(workdir):
    """A certificate for 127.0.0.1 and its key, made with openssl: (cert, key)."""
    cert, key = os.path.join(workdir, "cert.pem"), os.path.join(workdir, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", key, "-out", cert], check=True, capture_output=True,
                   stdin=subprocess.DEVNULL, timeout=120)
    return cert, key


# ---- the fault-injecting front ----------------------------------------------------------

class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # the faults break connections on purpose


class Front:
    """Serves PATH with ranges (ETag sent, If-Range ignored as a careless server would),
    and misbehaves as MODE says: ok, slow (sleeps SLOW seconds first), reset (closes the
    connection at once), redirect (302 to REDIRECT), shifted (a 206 for the range one byte
    further on), whole (200 with the whole file to a range), short (a 206 that
    stops half way), wrong (a 206 with flipped bytes), other (serves REPLACEMENT: another
    image, with another ETag and size). Counts requests; the first HEALTHY_FIRST of them
    are answered well whatever MODE says."""

    def __init__(self, path, port):
        self.path, self.port = path, port
        self.mode = "ok"
        self.slow = 30
        self.replacement = None
        self.requests = 0
        self.server = None
        self.lock = threading.Lock()
        self.inflight = 0        # requests being answered now
        self.most_inflight = 0   # the most at once
        self.delay = 0           # seconds each answer waits (to see overlap)
        self.redirect = None     # mode redirect: where to
        self.healthy_first = 0

    def url(self, name="image.stp"):
        return "http://127.0.0.1:%d/%s" % (self.port, name)

    def go_down(self):
        """The server goes away: nothing listens, kept-alive connections are dropped."""
        self.mode = "reset"
        if self.server:
            self.server.shutdown()
            self.server.server_close()
            self.server = None


def _handler(front):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_GET(self):
            with front.lock:
                front.requests += 1
                healthy = front.requests <= front.healthy_first
                front.inflight += 1
                front.most_inflight = max(front.most_inflight, front.inflight)
            try:
                if front.delay:
                    time.sleep(front.delay)
                self.answer("ok" if healthy else front.mode)
            finally:
                with front.lock:
                    front.inflight -= 1

        def answer(self, mode):
            if mode == "redirect":
                self.send_response(302)
                self.send_header("Location", front.redirect)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            path = front.replacement if mode == "other" else front.path
            with open(path, "rb") as f:
                data = f.read()
            etag = '"%x-%x"' % (len(data), os.stat(path).st_mtime_ns)
            if mode == "slow":
                time.sleep(front.slow)
            if mode == "reset":
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                           b"\x01\x00\x00\x00\x00\x00\x00\x00")
                self.close_connection = True
                self.connection.close()
                return
            m = re.match(r"bytes=(\d+)-(\d+)$", self.headers.get("Range", ""))
            if not m or mode == "whole":
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.send_header("ETag", etag)
                self.end_headers()
                self.wfile.write(data)
                return
            a, b = int(m.group(1)), min(int(m.group(2)), len(data) - 1)
            if mode == "shifted" and b + 1 < len(data):
                a, b = a + 1, b + 1  # another range than the one asked, of the same length
            body = data[a:b + 1]
            if mode == "wrong":
                body = bytes(x ^ 0x5a for x in body)
            self.send_response(206)
            self.send_header("Content-Range", "bytes %d-%d/%d" % (a, b, len(data)))
            self.send_header("Content-Length", str(len(body)))
            self.send_header("ETag", etag)
            self.end_headers()
            if mode == "short":
                self.wfile.write(body[:len(body) // 2])
                self.wfile.flush()
                self.close_connection = True
                return
            self.wfile.write(body)

    return Handler


@contextlib.contextmanager
def fault_front(path):
    """A Front serving PATH on a free loopback port, from threads of this process."""
    port = free_port()
    front = Front(path, port)
    server = _Server(("127.0.0.1", port), _handler(front))
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    front.server = server
    try:
        yield front
    finally:
        front.go_down()


def _answer_head(handler, root, etag, *headers):
    """Answers HANDLER's GET of a file under ROOT up to its body: 404 (returns None), or
    206 for a range (the rest of the file for an open one), else 200, with ETAG and
    HEADERS; returns the body to send."""
    try:
        with open(os.path.join(root, handler.path.lstrip("/").split("?")[0]), "rb") as f:
            data = f.read()
    except OSError:
        handler.send_response(404)
        handler.send_header("Content-Length", "0")
        handler.end_headers()
        return None
    m = re.match(r"bytes=(\d+)-(\d*)$", handler.headers.get("Range", ""))
    if m:
        a = int(m.group(1))
        b = min(int(m.group(2)) if m.group(2) else len(data) - 1, len(data) - 1)
        handler.send_response(206)
        handler.send_header("Content-Range", "bytes %d-%d/%d" % (a, b, len(data)))
        data = data[a:b + 1]
    else:
        handler.send_response(200)
    handler.send_header("Content-Length", str(len(data)))
    handler.send_header("ETag", etag)
    for name, value in headers:
        handler.send_header(name, value)
    handler.end_headers()
    return data


def _trickle_handler(root, rate, corrupt=False):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_GET(self):
            data = _answer_head(self, root, '"t"')
            if data is None:
                return
            if "/blocks/" not in self.path:
                self.wfile.write(data)
                return
            if corrupt:  # the right length, not the right bytes
                data = bytes(b ^ 0x55 for b in data)
            step = max(1, rate // 4)  # a few bytes every quarter of a second
            for at in range(0, len(data), step):
                self.wfile.write(data[at:at + step])
                self.wfile.flush()
                time.sleep(0.25)

    return Handler


@contextlib.contextmanager
def trickle_server(root, rate=16, corrupt=False):
    """Serves ROOT (ranges for the index) on a free loopback port, but a published
    release's block files at RATE bytes a second (16: above libcurl's low-speed floor of
    1 byte a second, never a stall); with CORRUPT, every byte of them wrong. Yields the
    base URL."""
    with _serving(_trickle_handler(os.fspath(root), rate, corrupt)) as base:
        yield base


def _closing_handler(root):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"  # no keep-alive: the connection closes after each answer

        def log_message(self, *args):
            pass

        def do_GET(self):
            data = _answer_head(self, root, '"c1"', ("Connection", "close"))
            if data is not None:
                self.wfile.write(data)

    return Handler


@contextlib.contextmanager
def closing_server(root):
    """Serves ROOT with ranges as a plain HTTP/1.0 server does: each connection closed
    after its one answer. Yields the base URL."""
    with _serving(_closing_handler(os.fspath(root))) as base:
        yield base


@contextlib.contextmanager
def _serving(handler):
    """HANDLER's server on a free loopback port, from a thread of this process; yields
    its base URL and stops it."""
    port = free_port()
    server = _Server(("127.0.0.1", port), handler)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        yield "http://127.0.0.1:%d/" % port
    finally:
        server.shutdown()
        server.server_close()


# ---- Squid -------------------------------------------------------------------------------

@contextlib.contextmanager
def squid(workdir, refresh=""):
    """Squid on 127.0.0.1 caching in memory (test_http_scale.py says why each line is
    there), everything it writes in WORKDIR, which its own user must be able to write.
    REFRESH: refresh_pattern lines that come before the catch-all one."""
    if not os.access(SQUID, os.X_OK):
        pytest.skip("squid is not installed (apt-get install squid)")
    workdir = os.fspath(workdir)
    port = free_port()
    conf = os.path.join(workdir, "squid.conf")
    with open(conf, "w") as f:
        f.write("""http_port 127.0.0.1:%(port)d
acl local src 127.0.0.1/32
http_access allow local
http_access deny all
cache_mem 512 MB
maximum_object_size_in_memory 256 MB
maximum_object_size 256 MB
memory_cache_mode always
range_offset_limit none
quick_abort_min -1 KB
collapsed_forwarding on
%(refresh)s
refresh_pattern . 60 100%% 600
pid_filename %(w)s/squid.pid
access_log stdio:%(w)s/access.log
cache_log %(w)s/cache.log
cache_store_log none
coredump_dir %(w)s
shutdown_lifetime 1 seconds
""" % {"port": port, "w": workdir, "refresh": refresh})
    proc = subprocess.Popen([SQUID, "-N", "-f", conf], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL,
                            stderr=open(os.path.join(workdir, "stderr"), "w"))
    try:
        wait_listening(port, proc, "squid", timeout=60)
        yield "http://127.0.0.1:%d" % port
    finally:
        stop(proc)


@contextlib.contextmanager
def proxy_dir(parent=None):
    """A directory for squid (in PARENT, else the system's temporary directory: never a
    private tmp_path): squid drops root for its own user, whose directory it must be."""
    try:
        user = pwd.getpwnam("proxy")
    except KeyError:
        pytest.skip("no 'proxy' user for Squid")
    d = tempfile.mkdtemp(prefix="stipple-squid-", dir=parent)
    os.chmod(d, 0o755)
    os.chown(d, user.pw_uid, user.pw_gid)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def squid_dir():
    """A proxy_dir for the test's squid."""
    with proxy_dir() as d:
        yield d


@pytest.fixture(autouse=True)
def _no_proxy_from_the_environment(monkeypatch):
    """The tests talk to loopback only: a proxy set for the machine must not come between
    (the scale-out test names its proxy with proxy=)."""
    for name in ("http_proxy", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY",
                 "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
