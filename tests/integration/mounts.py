# SPDX-License-Identifier: MIT
"""The kernel's mount table, read through libmount (util-linux's parser, which the mount
helper links too) instead of by hand: it unescapes the octal escapes of mountinfo (a
space in a path is \\040 there) and splits the fields where the kernel put them.

table(pid) lists a process's mounts; at(path) is the topmost mount at PATH, or None;
is_own_empty_root(pid, path) tells a daemon's sandbox root."""
import collections
import ctypes
import os
import subprocess

Mount = collections.namedtuple("Mount", "target source fstype root vfs_options fs_options "
                                        "major minor")
Mount.__doc__ = """One mountinfo entry; every field a str (options comma-separated, as the
kernel gives them: per-mount ones in vfs_options, the superblock's in fs_options), but
MAJOR and MINOR, the device's numbers."""

_lib = ctypes.CDLL("libmount.so.1", use_errno=True)
_lib.mnt_new_table_from_file.restype = ctypes.c_void_p
_lib.mnt_new_table_from_file.argtypes = [ctypes.c_char_p]
_lib.mnt_new_iter.restype = ctypes.c_void_p
_lib.mnt_new_iter.argtypes = [ctypes.c_int]
_lib.mnt_table_next_fs.argtypes = [ctypes.c_void_p, ctypes.c_void_p,
                                   ctypes.POINTER(ctypes.c_void_p)]
_lib.mnt_free_iter.argtypes = [ctypes.c_void_p]
_lib.mnt_unref_table.argtypes = [ctypes.c_void_p]
_GETTERS = {}
for _field, _fn in (("target", "mnt_fs_get_target"), ("source", "mnt_fs_get_source"),
                    ("fstype", "mnt_fs_get_fstype"), ("root", "mnt_fs_get_root"),
                    ("vfs_options", "mnt_fs_get_vfs_options"),
                    ("fs_options", "mnt_fs_get_fs_options")):
    _GETTERS[_field] = getattr(_lib, _fn)
    _GETTERS[_field].restype = ctypes.c_char_p
    _GETTERS[_field].argtypes = [ctypes.c_void_p]
_lib.mnt_fs_get_devno.restype = ctypes.c_uint64
_lib.mnt_fs_get_devno.argtypes = [ctypes.c_void_p]
MNT_ITER_FORWARD = 0


def _text(raw):
    return os.fsdecode(raw) if raw is not None else ""


def table(pid="self"):
    """The mounts PID sees (/proc/PID/mountinfo), in the kernel's order."""
    path = "/proc/%s/mountinfo" % pid
    with open(path, "rb") as f:
        if not f.read(1):
            return []  # a sandbox that sees no mount at all: libmount refuses the file
    tb = _lib.mnt_new_table_from_file(path.encode())
    if not tb:
        err = ctypes.get_errno()
        raise OSError(err, "libmount cannot read %s" % path)
    it = _lib.mnt_new_iter(MNT_ITER_FORWARD)
    out = []
    try:
        fs = ctypes.c_void_p()
        while _lib.mnt_table_next_fs(tb, it, ctypes.byref(fs)) == 0:
            dev = _lib.mnt_fs_get_devno(fs)
            out.append(Mount(**{k: _text(get(fs)) for k, get in _GETTERS.items()},
                             major=os.major(dev), minor=os.minor(dev)))
    finally:
        _lib.mnt_free_iter(it)
        _lib.mnt_unref_table(tb)
    return out


def at(path, pid="self"):
    """The topmost mount whose mount point is PATH (resolved), or None."""
    path = os.path.realpath(path)
    found = [m for m in table(pid) if m.target == path]
    return found[-1] if found else None


def host_devices():
    """The devices (major, minor) of every mount this process sees."""
    return {(m.major, m.minor) for m in table()}


def is_own_empty_root(pid, path):
    """Whether PATH is the directory PID has as its root, and that root an empty,
    read-only tmpfs which is none of the mounts this process sees (stat(1) names the
    type)."""
    st, root = os.stat(path), os.stat("/proc/%s/root" % pid)
    if (st.st_dev, st.st_ino) != (root.st_dev, root.st_ino):
        return False
    kind = subprocess.run(["stat", "-f", "-c", "%T", path], capture_output=True, text=True,
                          timeout=60).stdout.strip()
    return (kind == "tmpfs" and os.statvfs(path).f_flag & os.ST_RDONLY != 0 and
            (os.major(st.st_dev), os.minor(st.st_dev)) not in host_devices() and
            os.listdir(path) == [])
