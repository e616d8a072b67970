"""arfuse's PyTorch ops, compiled against the torch this process imports.

The ops (ops.cpp) are a C++ torch extension: an eager call runs no Python between the dispatcher
and the kernel launch. A torch extension must match its torch's version and C++ ABI exactly,
and the wheel is built without torch, so ``arfuse.torch`` compiles ops.cpp on first import,
with the host C++ compiler (``$CXX``, else ``c++``), into the arfuse cache folder under a key
made of torch's version, its ABI and the sources; later imports, and other processes, load that
file. Compiling takes seconds, once per torch version::

    python -m arfuse.torch_ops            # compile now (build machines, images), print the path
    python -m arfuse.torch_ops --help

The library is held to arfuse's rule for what it loads or runs (docs/cache.md): the library and
every folder up to ``/`` belong to root or this user and nobody else can write them (a sticky
folder such as /tmp may be writable by all). Where the cache folder breaks the rule, the ops are
compiled into a private temporary folder instead, removed when the process exits. The library is
loaded through the descriptor that was checked. The compiler runs in a process group of its own
with a time limit (``build(timeout=)``, default 600 s), and a process waiting for another's
compile waits at most as long.
"""

import argparse
import atexit
import ctypes
import fcntl
import hashlib
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

from .. import CompileError, Error, Unavailable, _arfuse, default_cache_dir

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


_COMPILE_TIMEOUT = 600.0  # seconds; compiling ops.cpp takes 4-8 s, far more on a loaded machine


def _trusted(path, kind, create=False):
    """A descriptor of `path` once it passes arfuse's rule for `kind` (private_folder, folder,
    file, program); arfuse.Error saying which component is at fault otherwise."""
    return _arfuse.open_trusted(os.fspath(path), kind, create)


def _compiler():
    cxx = os.environ.get("CXX") or "c++"
    path = shutil.which(cxx)
    if path is None:
        raise Unavailable(f"arfuse.torch compiles its ops against the installed torch on first import, and finds no "
                          f"C++ compiler: {cxx!r} is not on PATH. Install one (Debian: apt install g++) or set CXX")
    try:
        os.close(_trusted(path, "program"))
    except Error as e:
        raise Unavailable(f"the C++ compiler {path} is not run: {e}. Set CXX to one that only root and this user can "
                          f"change") from None
    return path


def _run(command, timeout):
    """(exit code, stdout, stderr) of `command`, run in a process group of its own that is killed
    whole at `timeout` seconds; None for the exit code when it timed out."""
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, start_new_session=True)
    try:
        out, err = process.communicate(timeout=timeout)
        return process.returncode, out, err
    except subprocess.TimeoutExpired:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            out, err = process.communicate(timeout=5)  # a descendant that left the group may hold the pipes
        except subprocess.TimeoutExpired:
            out, err = "", ""
        return None, out or "", err or ""


def _compiler_version(cxx):
    try:
        code, out, _ = _run([cxx, "--version"], 30)
        return out.splitlines()[0] if code == 0 else cxx
    except (OSError, IndexError):
        return cxx


def _key(torch, cxx):
    digest = hashlib.sha256()
    for part in (torch.__version__, str(torch.version.git_version), str(torch._C._GLIBCXX_USE_CXX11_ABI),
                 _compiler_version(cxx), _arfuse.version()):
        digest.update(part.encode() + b"\0")
    for path, data in _sources():
        digest.update(os.path.basename(path).encode() + b"\0" + data)
    return f"torch-{torch.__version__.replace('+', '-')}-{digest.hexdigest()[:16]}"


def _private_temporary_folder():
    """A fresh private folder for this process's library, removed when the process exits."""
    folder = tempfile.mkdtemp(prefix="arfuse-torch-ops-")
    atexit.register(shutil.rmtree, folder, True)
    try:
        os.close(_trusted(folder, "private_folder"))
    except Error as e:
        raise Unavailable(f"no folder to compile arfuse's torch ops into: the cache folder is refused and so is the "
                          f"temporary folder ({e}); set ARFUSE_CACHE_DIR or TMPDIR to a folder of this user") from None
    return folder


def _folder(cache_dir, key):
    """(folder, temporary): where the library of `key` lives, created private to this user, and
    whether it is a temporary one because the cache folder breaks the rule."""
    cache = os.path.abspath(cache_dir or default_cache_dir())
    folder = os.path.join(cache, "torch-ops", key)
    try:
        os.close(_trusted(folder, "private_folder", create=True))
        return folder, False
    except Error as e:
        print(f"arfuse: the torch ops are not kept in {folder}: {e}; compiling them into a private temporary folder "
              f"instead (removed at exit)", file=sys.stderr)
    return _private_temporary_folder(), True


def _clear_name(folder, name):
    """Removes what is at `name` in `folder` (a private folder: only this user or root put it
    there) unless it is a regular file; says so when it removes something."""
    path = os.path.join(folder, name)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISREG(info.st_mode):
        return
    kind = "folder" if stat.S_ISDIR(info.st_mode) else "link" if stat.S_ISLNK(info.st_mode) else "special file"
    print(f"arfuse: removing a {kind} at {path}, where the compiled library belongs", file=sys.stderr)
    if stat.S_ISDIR(info.st_mode):
        shutil.rmtree(path)
    else:
        os.unlink(path)


def _remove_partials(folder):
    """Partial libraries of writers that died (a killed first import): only the holder of the
    folder's lock writes one, so every one found under the lock is a leftover."""
    for name in os.listdir(folder):
        if name.startswith(f".{_LIBRARY_NAME}."):
            path = os.path.join(folder, name)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)


def _lock(folder, timeout):
    """The folder's lock, held; waits at most `timeout` seconds for another process's compile."""
    fd = os.open(os.path.join(folder, ".lock"), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    deadline = time.monotonic() + timeout
    said = False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            pass
        if time.monotonic() >= deadline:
            os.close(fd)
            raise CompileError(f"another process has been compiling arfuse's torch ops in {folder} for more than "
                               f"{timeout:.0f} s; try again, or pass a private cache_dir")
        if not said:
            print(f"arfuse: waiting for another process compiling the torch ops in {folder}", file=sys.stderr,
                  flush=True)
            said = True
        time.sleep(0.1)


def _compile(torch, cxx, target, timeout):
    torch_dir = os.path.dirname(torch.__file__)
    command = [cxx, "-std=c++17", "-O2", "-fPIC", "-shared", "-fvisibility=hidden",
               f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
               "-isystem", os.path.join(torch_dir, "include"), "-I", _include_dir(),
               os.path.join(_HERE, "ops.cpp"), "-o", target,
               "-L", os.path.join(torch_dir, "lib"), "-lc10", "-ltorch_cpu", "-ltorch", "-Wl,--no-undefined"]
    code, _, err = _run(command, timeout)
    if code is None:
        raise CompileError(f"compiling arfuse's torch ops did not finish in {timeout:.0f} s and was stopped (the "
                           f"compiler and everything it started):\n  {' '.join(command)}\n{err[-4000:]}")
    if code != 0:
        raise CompileError(f"compiling arfuse's torch ops failed (exit {code}):\n  {' '.join(command)}\n"
                           f"{err[-4000:]}")


def _usable(library):
    """Whether `library` is a regular file that passes the rule (its folders included)."""
    try:
        os.close(_trusted(library, "file"))
        return True
    except Error:
        return False


def build(cache_dir=None, quiet=False, timeout=_COMPILE_TIMEOUT):
    """The path of the ops library for the torch imported here, compiling it first when the cache
    has none. Concurrent processes wait for one compile (a lock in the folder), at most `timeout`
    seconds, which also bounds the compile."""
    import torch

    cxx = _compiler()
    folder, temporary = _folder(cache_dir, _key(torch, cxx))
    library = os.path.join(folder, _LIBRARY_NAME)
    if _usable(library):
        return library  # also from a read-only cache folder
    try:
        lock = _lock(folder, timeout)
    except OSError as e:  # a read-only cache folder, or something planted at the lock's name
        print(f"arfuse: cannot lock {folder} ({e.strerror}); compiling the torch ops into a private temporary folder "
              f"instead (removed at exit)", file=sys.stderr)
        folder, temporary = _private_temporary_folder(), True
        library = os.path.join(folder, _LIBRARY_NAME)
        lock = _lock(folder, timeout)
    try:
        if _usable(library):
            return library  # another process compiled it while this one waited
        _remove_partials(folder)
        _clear_name(folder, _LIBRARY_NAME)
        if not quiet:
            print(f"arfuse: compiling the PyTorch ops for torch {torch.__version__} into {folder} (once per torch "
                  f"version; seconds)", file=sys.stderr, flush=True)
        start = time.monotonic()
        partial = os.path.join(folder, f".{_LIBRARY_NAME}.{os.getpid()}")
        try:
            _compile(torch, cxx, partial, timeout)
            os.chmod(partial, 0o700)
            os.replace(partial, library)  # readers see the whole file or none
        finally:
            if os.path.lexists(partial):
                os.unlink(partial)
        if not quiet:
            print(f"arfuse: compiled in {time.monotonic() - start:.0f} s", file=sys.stderr, flush=True)
    finally:
        os.close(lock)
    if temporary:
        print(f"arfuse: the torch ops are in {library}, removed at exit; later processes compile them again",
              file=sys.stderr)
    return library


def load(cache_dir=None):
    """Registers torch.ops.arfuse.* in this process (compiling on a cache miss) and binds them to
    arfuse._arfuse's communicators; the path of the library. Idempotent."""
    global _loaded
    if _loaded is None:
        import torch

        library = build(cache_dir)
        # Loaded through the descriptor that passed the rule: what is loaded is what was checked.
        try:
            fd = _trusted(library, "file")
        except Error as e:
            raise Unavailable(f"arfuse's torch ops library {library} is not loaded: {e}") from None
        try:
            by_descriptor = f"/proc/self/fd/{fd}"
            torch.ops.load_library(by_descriptor)
            bind = ctypes.CDLL(by_descriptor).arfuse_torch_ops_bind
        finally:
            os.close(fd)
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
    parser.add_argument("--timeout", type=float, default=_COMPILE_TIMEOUT,
                        help=f"seconds the compile (or a wait for another process's) may take (default "
                             f"{_COMPILE_TIMEOUT:.0f})")
    args = parser.parse_args(argv)
    if args.cache_dir == "":
        parser.error("--cache-dir has an empty value; give one")
    if not args.timeout > 0:
        parser.error(f"--timeout must be a number of seconds > 0, not {args.timeout}")
    try:
        import torch  # noqa: F401
    except ImportError:
        print("python -m arfuse.torch_ops: torch is not installed; the ops are compiled against it", file=sys.stderr)
        return 1
    try:
        library = build(args.cache_dir, timeout=args.timeout)
    except (CompileError, Unavailable) as e:
        print(f"python -m arfuse.torch_ops: {e}", file=sys.stderr)
        return 1
    kept = os.path.join(os.path.abspath(args.cache_dir or default_cache_dir()), "torch-ops") + os.sep
    if not library.startswith(kept):
        print(f"python -m arfuse.torch_ops: the library could not be kept in the cache folder (see above); nothing "
              f"was compiled ahead", file=sys.stderr)
        return 1
    print(library)
    return 0
