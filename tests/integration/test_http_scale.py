# SPDX-License-Identifier: MIT
"""Scale-out through a caching proxy: nginx as the origin, Squid in front of it on
loopback, 8 mounts with 8 separate disk caches reading the whole tree at once, and the
bytes the origin served counted from its access log.

Squid does not cache partial answers by itself. The lines of httputil.squid() that make it
work for range requests:
  range_offset_limit none    on a range miss Squid fetches the whole object from the
                             origin (and serves the range from it), so that it can cache it;
  quick_abort_min -1 KB      it finishes that fetch even when the client that asked has
                             its range already and goes;
  collapsed_forwarding on    concurrent misses for one URL wait for that one fetch instead
                             of each going to the origin;
  cache_mem, maximum_object_size(_in_memory), memory_cache_mode always
                             the image is kept in memory, whatever its size up to 256 MiB;
  refresh_pattern . 60 100% 600
                             nginx sends no Cache-Control: Squid may keep the object fresh
                             for up to 10 minutes from its Last-Modified age.
"""

import concurrent.futures
import contextlib
import os
import shutil
import subprocess

import httputil
from httputil import _no_proxy_from_the_environment, squid_dir  # noqa: F401 (fixtures)
import treeutil
from conftest import STIPPLE, mount_image, read_file
from test_http import cache_files

CLIENTS = 8


def test_eight_clients_behind_squid(tmp_path, gen_image, gen_tree, squid_dir, monkeypatch):
    www = tmp_path / "www"
    www.mkdir()
    shutil.copy(gen_image, www / "app.stp")
    size = os.path.getsize(gen_image)
    with httputil.nginx(www, tmp_path / "nginx") as origin, httputil.squid(squid_dir) as proxy:
        url = origin.url("app.stp")
        with contextlib.ExitStack() as stack:
            # the first client finds the proxy in the environment, the others in proxy=
            monkeypatch.setenv("http_proxy", proxy)
            mounts = [stack.enter_context(mount_image(
                url, None, "-o", "cache_dir=%s,timeout=20" % (tmp_path / "c0")))]
            monkeypatch.delenv("http_proxy")
            mounts += [stack.enter_context(mount_image(
                url, None, "-o", "proxy=%s,cache_dir=%s,timeout=20" % (proxy, tmp_path / ("c%d" % i))))
                for i in range(1, CLIENTS)]
            # all 8 read at once: Squid collapses their misses
            with concurrent.futures.ThreadPoolExecutor(CLIENTS) as pool:
                results = list(pool.map(lambda m: treeutil.compare_trees(gen_tree, m), mounts))
            for diffs in results:
                assert not diffs, "\n".join(diffs[:20])
        # a reader takes its proxy from the environment too, and gets it from the cache
        monkeypatch.setenv("http_proxy", proxy)
        r = subprocess.run([STIPPLE, "cat", url, "files/large"], capture_output=True,
                           stdin=subprocess.DEVNULL, timeout=120)
        monkeypatch.delenv("http_proxy")
        assert r.returncode == 0 and r.stdout == read_file(gen_tree / "files" / "large")
        served = origin.bytes_sent()
        print("origin served %d bytes for %d clients of a %d-byte image (%.3f x)"
              % (served, CLIENTS, size, served / size))
        assert served <= 1.05 * size + 4096, (served, size)
        for i in range(CLIENTS):
            assert len(cache_files(tmp_path / ("c%d" % i))) == 1

