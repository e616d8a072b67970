"""arfuse from Python: kernel cache warm-up, spec parsing, cache checks, and arfuse's errors.

Importing it needs no GPU, no driver and no torch. Every error arfuse raises is an
``arfuse.Error`` (or a subclass: ``ConfigError``, ``Unavailable``, ``UnsupportedTarget``,
``CompileError``, ``DeviceError``, ``PeerTimeout``, ``CallMismatch``) carrying the C++ message.
"""

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile

from ._arfuse import (  # noqa: F401  (re-exported)
    CallMismatch,
    CompileError,
    ConfigError,
    DeviceError,
    Error,
    PeerTimeout,
    Unavailable,
    UnsupportedTarget,
)
from . import _arfuse

__version__ = _arfuse.version()

__all__ = [
    "Error", "ConfigError", "Unavailable", "UnsupportedTarget", "CompileError", "DeviceError",
    "PeerTimeout", "CallMismatch", "__version__", "parse_spec", "modes", "default_cache_dir", "settings",
    "cache_stat", "cache_verify", "tool_path", "warmup",
]


def parse_spec(text):
    """The fields of a kernel spec ("fused_ar/h6144/bf16/fp8/rms/w4/s1/sm_90") as a dict.

    Raises Error naming the bad field and what is allowed.
    """
    return json.loads(_arfuse.parse_spec(text))


def modes():
    """The names each mode argument takes: {"quant": [...], "norm": [...], "scale_format": [...],
    "scale_layout": [...]}, from the C++ library's own lists; "reads_scale" the quant modes
    that read a scale tensor (``scale=``)."""
    return json.loads(_arfuse.modes())


def default_cache_dir():
    """The cache folder arfuse uses when none is given ($ARFUSE_CACHE_DIR, ...)."""
    return _arfuse.default_cache_dir()


def settings():
    """Every ARFUSE_* environment variable: a list of {name, type, default, meaning}."""
    return json.loads(_arfuse.settings())


def cache_stat(cache_dir=None):
    """Entries, bad entries, bytes and writers' temporaries of a cache folder, as a dict.

    Reads only: a folder that does not exist is reported (``exists`` False), not created."""
    return json.loads(_arfuse.cache_stat(_folder(cache_dir)))


def cache_verify(cache_dir=None):
    """Checks every entry of a cache folder: a list of {file, ok, problem, spec} (empty, and
    nothing created, for a folder that does not exist)."""
    return json.loads(_arfuse.cache_verify(_folder(cache_dir)))


def tool_path(name):
    """The installed arfuse tool `name` (arfuse-warmup, arfuse-cache, arfuse-bench)."""
    candidates = [os.path.join(sysconfig.get_path("scripts"), name), os.path.join(os.path.dirname(sys.executable), name)]
    for path in candidates:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    found = shutil.which(name)
    if found is None:
        raise Unavailable(f"{name} is not installed with this arfuse package (looked in {', '.join(candidates)} and PATH)")
    return found


def warmup(specs=None, targets=None, cache_dir=None, jobs=None, memory_only=False, timeout=None):
    """Compiles kernel specs into the cache, as ``arfuse-warmup`` does; returns its JSON report.

    specs: None for the default set, or a list of spec-set entries as in the tool's --config
    (e.g. ``{"module": "rmsnorm_quant", "hidden": [6144], "dtype": ["bf16"]}``; omitted fields
    take all values). targets: e.g. ["sm_90", "gfx942"]; None: the local GPUs, else sm_90.
    Raises ConfigError for bad arguments or settings (the tool's exit 2) and Error when a spec is
    not stored (exit 1; the report is the exception's ``report`` attribute).
    """
    if specs is not None and not isinstance(specs, (list, tuple)):
        raise ConfigError(f"specs must be a list of spec-set entries or None; got {type(specs).__name__}")
    if targets is not None and (isinstance(targets, str) or not all(isinstance(t, str) for t in targets)):
        raise ConfigError(f"targets must be a list of target names such as ['sm_90']; got {targets!r}")
    if jobs is not None and (not isinstance(jobs, int) or isinstance(jobs, bool) or jobs < 1):
        raise ConfigError(f"jobs must be a positive integer; got {jobs!r}")
    with tempfile.TemporaryDirectory(prefix="arfuse-warmup-") as scratch:
        report_path = os.path.join(scratch, "report.json")
        command = [tool_path("arfuse-warmup"), "--quiet", "--json", report_path]
        if specs is not None:
            config_path = os.path.join(scratch, "specs.json")
            with open(config_path, "w") as f:
                json.dump({"specs": list(specs)}, f)
            command += ["--config", config_path]
        for target in targets or []:
            command += ["--target", target]
        if cache_dir is not None:
            command += ["--cache-dir", os.fspath(cache_dir)]
        if jobs is not None:
            command += ["--jobs", str(jobs)]
        if memory_only:
            command.append("--memory-only")
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        report = None
        if os.path.exists(report_path):
            with open(report_path) as f:
                report = json.load(f)
    if done.returncode == 2:
        raise ConfigError(done.stderr.strip() or done.stdout.strip())
    if done.returncode != 0:
        error = Error(f"arfuse-warmup exited {done.returncode}: {(done.stderr or done.stdout).strip()}")
        error.report = report
        raise error
    return report


def _folder(cache_dir):
    return "" if cache_dir is None else os.fspath(cache_dir)
