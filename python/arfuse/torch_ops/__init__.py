"""arfuse's PyTorch ops, compiled against the torch this process imports.

The ops (ops.cpp) are a C++ torch extension: an eager call runs no Python between the dispatcher
and the kernel launch. A torch extension must match its torch's version and C++ ABI exactly,
and the wheel is built without torch, so ``arfuse.torch`` compiles ops.cpp on first import,
with the host C++ compiler (``$CXX``, else ``c++``), into the arfuse cache folder under a key
made of torch's version, its ABI and the sources; later imports, and other processes, load that
file. Compiling takes seconds, once per torch version::

    python -m arfuse.torch_ops            # compile now (build machines, images), print the path
    python -m arfuse.torch_ops --help

The folder it writes is the cache folder's ``torch-ops/<key>/``, created private to the user;
a folder or file that another user could have written is not loaded (the ops are compiled
again into a private temporary folder instead).
"""

import argparse
import ctypes
import fcntl
import hashlib
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time

from .. import CompileError, Unavailable, _arfuse, default_cache_dir

_HERE = os.path.dirname(os.path.realpath(__file__))
_LIBRARY_NAME = "arfuse_torch_ops.so"
_loaded = None


def _sources():
    """ops.cpp, op_table.hpp and the arfuse headers they include, as (path, bytes)."""
    include = _include_dir()
    paths = [os.path.join(_HERE, "ops.cpp"), os.path.join(_HERE, "op_table.hpp")]
    for folder, _, files in sorted(os.walk(os.path.join(include, "arfuse"))):
        paths += [os.path.join(folder, f) for f in sorted(files) if f.endswith(".hpp")]
    return [(p, open(p, "rb").read()) for p in paths]


def _include_dir():
    """The public headers: installed beside this file, or the source tree's include/."""
    installed = os.path.join(_HERE, "include")
    if os.path.isdir(os.path.join(installed, "arfuse")):
        return installed
    source_tree = os.path.normpath(os.path.join(_HERE, "..", "..", "..", "include"))
    if os.path.isdir(os.path.join(source_tree, "arfuse")):
        return source_tree
    raise Unavailable(f"arfuse's public headers are neither in {installed} nor in {source_tree}; reinstall arfuse")


def _compiler():
    cxx = os.environ.get("CXX") or "c++"
    path = shutil.which(cxx)
    if path is None:
        raise Unavailable(f"arfuse.torch compiles its ops against the installed torch on first import, and finds no "
                          f"C++ compiler: {cxx!r} is not on PATH. Install one (Debian: apt install g++) or set CXX")
    return path


def _compiler_version(cxx):
    try:
        return subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=60).stdout.splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return cxx


def _key(torch, cxx):
    digest = hashlib.sha256()
    for part in (torch.__version__, str(torch.version.git_version), str(torch._C._GLIBCXX_USE_CXX11_ABI),
                 _compiler_version(cxx), _arfuse.version()):
        digest.update(part.encode() + b"\0")
    for path, data in _sources():
        digest.update(os.path.basename(path).encode() + b"\0" + data)
    return f"torch-{torch.__version__.replace('+', '-')}-{digest.hexdigest()[:16]}"


def _private(path):
    """Whether `path` belongs to this user and nobody else can write it."""
    info = os.lstat(path)
    return info.st_uid == os.getuid() and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH) \
        and not stat.S_ISLNK(info.st_mode)


def _folder(cache_dir, key):
    """The folder the library of `key` lives in, made private to this user; when it, torch-ops/ or
    the cache folder is not (another user's, group- or world-writable, a link), a fresh temporary
    one."""
    cache = os.path.abspath(cache_dir or default_cache_dir())
    root = os.path.join(cache, "torch-ops")
    folder = os.path.join(root, key)
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        if _private(cache) and _private(root) and _private(folder):
            return folder, False
        print(f"arfuse: {folder} (or a folder above it, up to the cache folder) is writable by another user or is a "
              f"link; compiling the torch ops into a private temporary folder instead", file=sys.stderr)
    except OSError as e:
        print(f"arfuse: cannot use {folder} ({e.strerror}); compiling the torch ops into a temporary folder",
              file=sys.stderr)
    return tempfile.mkdtemp(prefix="arfuse-torch-ops-"), True


def _compile(torch, cxx, target):
    torch_dir = os.path.dirname(torch.__file__)
    command = [cxx, "-std=c++17", "-O2", "-fPIC", "-shared", "-fvisibility=hidden",
               f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
               "-isystem", os.path.join(torch_dir, "include"), "-I", _include_dir(),
               os.path.join(_HERE, "ops.cpp"), "-o", target,
               "-L", os.path.join(torch_dir, "lib"), "-lc10", "-ltorch_cpu", "-ltorch", "-Wl,--no-undefined"]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise CompileError(f"compiling arfuse's torch ops failed (exit {result.returncode}):\n  {' '.join(command)}\n"
                           f"{result.stderr[-4000:]}")


def build(cache_dir=None, quiet=False):
    """The path of the ops library for the torch imported here, compiling it first when the cache
    has none. Concurrent processes wait for one compile (a lock in the folder)."""
    import torch

    cxx = _compiler()
    folder, temporary = _folder(cache_dir, _key(torch, cxx))
    library = os.path.join(folder, _LIBRARY_NAME)
    if os.path.isfile(library) and _private(library):
        return library  # also from a read-only cache folder
    try:
        lock = open(os.path.join(folder, ".lock"), "a")
    except OSError as e:
        print(f"arfuse: cannot write {folder} ({e.strerror}); compiling the torch ops into a temporary folder",
              file=sys.stderr)
        folder, temporary = tempfile.mkdtemp(prefix="arfuse-torch-ops-"), True
        library = os.path.join(folder, _LIBRARY_NAME)
        lock = open(os.path.join(folder, ".lock"), "a")
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.isfile(library) and _private(library):
            return library  # another process compiled it while this one waited
        if not quiet:
            print(f"arfuse: compiling the PyTorch ops for torch {torch.__version__} into {folder} (once per torch "
                  f"version; seconds)", file=sys.stderr, flush=True)
        start = time.monotonic()
        partial = os.path.join(folder, f".{_LIBRARY_NAME}.{os.getpid()}")
        try:
            _compile(torch, cxx, partial)
            os.chmod(partial, 0o700)
            os.replace(partial, library)  # readers see the whole file or none
        finally:
            if os.path.exists(partial):
                os.unlink(partial)
        if not quiet:
            print(f"arfuse: compiled in {time.monotonic() - start:.0f} s", file=sys.stderr, flush=True)
    if temporary:
        print(f"arfuse: the torch ops are in {library}; it is not reused by later processes", file=sys.stderr)
    return library


def load(cache_dir=None):
    """Registers torch.ops.arfuse.* in this process (compiling on a cache miss) and binds them to
    arfuse._arfuse's communicators; the path of the library. Idempotent."""
    global _loaded
    if _loaded is None:
        import torch

        library = build(cache_dir)
        torch.ops.load_library(library)
        bind = ctypes.CDLL(library).arfuse_torch_ops_bind
        bind.restype = ctypes.c_bool
        if not bind(ctypes.c_void_p(_arfuse.op_table())):
            raise Unavailable(f"{library} was built from other sources than this arfuse's extension module; "
                              f"delete it and import arfuse.torch again")
        _loaded = library
    return _loaded


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m arfuse.torch_ops", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache-dir", help="the arfuse cache folder (default: arfuse.default_cache_dir())")
    args = parser.parse_args(argv)
    try:
        import torch  # noqa: F401
    except ImportError:
        print("python -m arfuse.torch_ops: torch is not installed; the ops are compiled against it", file=sys.stderr)
        return 1
    try:
        print(build(args.cache_dir))
    except (CompileError, Unavailable) as e:
        print(f"python -m arfuse.torch_ops: {e}", file=sys.stderr)
        return 1
    return 0
