# SPDX-License-Identifier: MIT
"""Web servers for the HTTP tests, on loopback only: nginx as an origin (its own config,
logs and temporary directories under the test's tmp_path, a free port), Squid as a
caching proxy in front of it, and a fault-injecting front written here. Each is a context
manager that stops what it started."""

import contextlib
import http.server
import os
import re
import shutil
import socket
import subprocess
import threading
import time

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

    def url(self, name):
        return "http://127.0.0.1:%d/%s" % (self.port, name)

    def log_entries(self):
        """(method, status, body bytes, range header) of each request so far."""
        out = []
        with open(self.access_log) as f:
            for line in f:
                m = re.match(r'(\S+) (\d+) (\d+) "(.*)"', line)
                if m:
                    out.append((m.group(1), int(m.group(2)), int(m.group(3)), m.group(4)))
        return out

    def bytes_sent(self):
        return sum(e[2] for e in self.log_entries())


@contextlib.contextmanager
def nginx(root, workdir):
    """nginx serving ROOT (read-only) on 127.0.0.1, with everything else in WORKDIR."""
    if not os.access(NGINX, os.X_OK):
        import pytest
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
  log_format counted '$request_method $status $body_bytes_sent "$http_range"';
  access_log %(log)s counted;
%(temps)s  keepalive_requests 100000;
  server {
    listen 127.0.0.1:%(port)d;
    root %(root)s;
    location / { }
  }
}
""" % {"w": workdir, "log": log, "temps": temps, "port": port, "root": os.fspath(root)})
    proc = subprocess.Popen([NGINX, "-c", conf, "-p", workdir], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=open(os.path.join(workdir, "stderr"), "w"))
    try:
        wait_listening(port, proc, "nginx")
        yield Nginx(root, port, log)
    finally:
        stop(proc)
