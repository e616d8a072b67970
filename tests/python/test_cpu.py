"""CPU tests of the Python package (CI): import without a GPU, exceptions, specs, settings,
cache checks, and a warm-up through the installed tool."""

import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

import arfuse


def test_import_version_and_exception_hierarchy():
    assert arfuse.__version__.count(".") == 2
    for name in ["ConfigError", "Unavailable", "UnsupportedTarget", "CompileError", "DeviceError", "PeerTimeout",
                 "CallMismatch"]:
        assert issubclass(getattr(arfuse, name), arfuse.Error)
    assert issubclass(arfuse.Error, Exception)


@pytest.mark.parametrize("kind", ["Error", "ConfigError", "Unavailable", "PeerTimeout", "CallMismatch", "DeviceError"])
def test_cpp_exceptions_arrive_as_their_python_class_with_the_message(kind):
    with pytest.raises(getattr(arfuse, kind)) as caught:
        arfuse._arfuse._raise(kind, f"the {kind} message")
    assert type(caught.value) is getattr(arfuse, kind)
    assert str(caught.value) == f"the {kind} message"


def test_peer_timeout_and_call_mismatch_carry_the_ranks():
    with pytest.raises(arfuse.PeerTimeout) as timeout:
        arfuse._arfuse._raise("PeerTimeout", "rank 3 did not arrive")
    assert timeout.value.rank == 3
    with pytest.raises(arfuse.CallMismatch) as mismatch:
        arfuse._arfuse._raise("CallMismatch", "ranks 0 and 1 differ")
    assert (mismatch.value.rank, mismatch.value.peer) == (0, 1)


def test_specs_parse_and_bad_fields_are_named():
    spec = arfuse.parse_spec("fused_ar/h6144/bf16/fp8/mirror/gemma/w4/s2/sm_90")
    assert spec["module"] == "fused_ar" and spec["hidden"] == 6144 and spec["world"] == 4 and spec["stage"] == 2
    assert spec["quant"] == "fp8" and spec["mirror"] is True
    with pytest.raises(arfuse.Error, match="hidden"):
        arfuse.parse_spec("rmsnorm_quant/h6145/bf16/fp8/rms/sm_90")
    with pytest.raises(arfuse.Error, match="world size 9"):
        arfuse.parse_spec("fused_ar/h6144/bf16/fp8/rms/w9/s1/sm_90")


def test_check_mode_accepts_the_calls_modes_and_names_what_is_wrong():
    check = arfuse._arfuse.check_mode
    for quant in ["fp8", "mxfp4"]:
        for mirror in [False, True]:
            check(quant, "rms", 0, "f32", "row_major", mirror, 96)  # the group is only checked for fp8_group
    check("none", "rms", 0, "f32", "row_major", False, 96)
    for group in [32, 64, 128]:
        check("fp8_group", "gemma", group, "e8m0", "column_major", True, 256)
    bad = [(("int8", "rms", 128, "f32", "row_major", False, 256), "quant mode 'int8'"),
           (("fp8", "layer", 128, "f32", "row_major", False, 256), "norm mode 'layer'"),
           (("fp8_group", "rms", 128, "f16", "row_major", False, 256), "scale format 'f16'"),
           (("fp8_group", "rms", 128, "f32", "rows", False, 256), "scale layout 'rows'"),
           (("fp8_group", "rms", 48, "f32", "row_major", False, 256), "group size 48 is not supported"),
           (("fp8_group", "rms", 128, "f32", "row_major", False, 96), "group size 128 does not divide hidden size 96"),
           (("mxfp4", "rms", 128, "f32", "column_major", False, 256),
            "scale_layout column_major is not a layout quant mxfp4 takes: allowed is row_major"),
           (("mxfp4", "rms", 128, "f32", "row_major", False, 48), "divisible by 32, not 48"),
           (("nvfp4", "rms", 128, "f32", "row_major", False, 40), "divisible by 16, not 40"),
           (("nvfp4", "rms", 128, "f32", "column_major", False, 256),
            "scale_layout column_major is not a layout quant nvfp4 takes: allowed are row_major or swizzled_128x4"),
           (("fp8", "rms", 128, "f32", "swizzled_128x4", False, 256), "swizzled_128x4 is not a layout quant fp8 takes"),
           (("none", "rms", 128, "f32", "row_major", True, 256), "mirror is set with quant none")]
    for args, words in bad:
        with pytest.raises(arfuse.Error) as caught:
            check(*args)
        assert words in str(caught.value), (args, str(caught.value))


def test_modes_are_the_names_the_calls_accept():
    modes = arfuse.modes()
    # The mode table's names, each once, "none" first; a new row needs no edit here.
    assert modes["quant"][0] == "none" and len(set(modes["quant"])) == len(modes["quant"])
    assert {"fp8", "fp8_group", "mxfp4", "fp8_static", "nvfp4"} <= set(modes["quant"])
    assert modes["norm"] == ["rms", "gemma"]
    assert modes["scale_format"] == ["f32", "ue8m0_f32", "e8m0"]
    assert modes["scale_layout"] == ["row_major", "column_major", "swizzled_128x4"]
    assert {"fp8_static", "nvfp4"} <= set(modes["reads_scale"]) <= set(modes["quant"]) - {"none", "fp8"}
    check = arfuse._arfuse.check_mode
    for quant in modes["quant"]:
        for norm in modes["norm"]:
            for scale_format in modes["scale_format"]:
                check(quant, norm, 32, scale_format, "row_major", quant != "none", 256)
    for layout in modes["scale_layout"]:
        check("nvfp4" if layout == "swizzled_128x4" else "fp8_group", "rms", 128, "f32", layout, False, 256)


def test_settings_list_every_arfuse_variable():
    names = [s["name"] for s in arfuse.settings()]
    assert "ARFUSE_CACHE_DIR" in names and "ARFUSE_DEVICE_BACKEND" in names
    assert all(n.startswith("ARFUSE_") for n in names) and len(names) == len(set(names))


def test_warmup_stores_specs_and_cache_checks_see_them(tmp_path):
    cache = tmp_path / "cache"
    specs = [{"module": "rmsnorm_quant", "hidden": [2048], "dtype": ["bf16"], "quant": ["none", "fp8"], "norm": ["rms"]}]
    report = arfuse.warmup(specs=specs, targets=["sm_90"], cache_dir=cache, jobs=1)
    text = json.dumps(report)
    assert "rmsnorm_quant/h2048/bf16/fp8/rms/sm_90" in text
    stat = arfuse.cache_stat(cache)
    assert stat["exists"] and stat["usable"] and stat["entries"] == 2 and stat["bad"] == 0
    checked = arfuse.cache_verify(cache)
    assert sorted(c["spec"] for c in checked) == ["rmsnorm_quant/h2048/bf16/fp8/rms/sm_90",
                                                  "rmsnorm_quant/h2048/bf16/none/rms/sm_90"]
    # A damaged entry is reported by name, never raised.
    victim = os.path.join(cache, checked[0]["file"])
    with open(victim, "r+b") as f:
        f.seek(200)
        f.write(b"\xff\xff\xff\xff")
    damaged = [c for c in arfuse.cache_verify(cache) if not c["ok"]]
    assert len(damaged) == 1 and damaged[0]["problem"]
    assert arfuse.cache_stat(cache)["bad"] == 1


def test_warmup_refuses_bad_arguments_as_config_errors(tmp_path):
    with pytest.raises(arfuse.ConfigError, match="jobs"):
        arfuse.warmup(jobs=0)
    with pytest.raises(arfuse.ConfigError, match="targets"):
        arfuse.warmup(targets="sm_90")
    with pytest.raises(arfuse.ConfigError):  # the tool's exit 2: a value it refuses
        arfuse.warmup(specs=[{"module": "rmsnorm_quant", "hidden": [6145]}], targets=["sm_90"], cache_dir=tmp_path)
    with pytest.raises(arfuse.Error) as failed:  # exit 1: a target no compiler builds
        arfuse.warmup(specs=[{"module": "token_quant", "hidden": [2048], "dtype": ["bf16"]}], targets=["sm_71"],
                      cache_dir=tmp_path / "c2")
    assert failed.value.report is not None


def test_cache_checks_of_a_missing_folder_create_nothing(tmp_path):
    missing = tmp_path / "not-there"
    stat = arfuse.cache_stat(missing)
    assert stat["exists"] is False and stat["entries"] == 0 and "does not exist" in stat["problem"]
    assert arfuse.cache_verify(missing) == []
    assert not missing.exists()


def test_an_untrusted_cache_folder_is_reported_not_used(tmp_path):
    folder = tmp_path / "open"
    folder.mkdir()
    os.chmod(folder, 0o777)
    stat = arfuse.cache_stat(folder)
    assert not stat["usable"] and "writable" in stat["problem"]


def test_extension_module_needs_no_libfmt():
    # A system libfmt loaded before PyTorch made `import torch` abort; the package builds fmt in.
    dynamic = subprocess.run(["readelf", "-d", arfuse._arfuse.__file__], capture_output=True, text=True, check=True)
    needed = [line for line in dynamic.stdout.splitlines() if "(NEEDED)" in line]
    assert needed and not any("libfmt" in line for line in needed), needed


def test_arfuse_imported_before_torch():
    # The order an engine may use; it once aborted in torch's import (see pyproject.toml).
    pytest.importorskip("torch")
    done = subprocess.run([sys.executable, "-c", "import arfuse; import torch; import torch.nn; import arfuse.torch"],
                          capture_output=True, text=True, cwd="/")
    assert done.returncode == 0, done.stderr[-2000:]


def test_docs_name_every_public_function_and_every_op_argument():
    # docs/python.md against the package: every public name, every op and each op's arguments
    # (read from the op definitions' source, so this needs no torch).
    root = pathlib.Path(__file__).resolve().parents[2]
    text = (root / "docs" / "python.md").read_text()
    missing = [name for name in arfuse.__all__ if f"`{name}" not in text and f" {name} " not in text]
    assert not missing, f"docs/python.md does not name {missing}"
    # The ops' schemas, as ops.cpp defines them: m.def("name(type arg, type arg=default, ...) -> ...").
    source = (root / "python" / "arfuse" / "torch_ops" / "ops.cpp").read_text()
    schemas = re.findall(r'm\.def\(\s*((?:"[^"]*"\s*)+)\)', source)
    ops = {}
    for schema in schemas:
        text_ = "".join(re.findall(r'"([^"]*)"', schema))
        name, args = re.match(r"(\w+)\((.*)\) ->", text_).groups()
        ops[name] = [re.split(r"[ =]", a.strip())[1] for a in args.split(",")]
    ops.pop("dispatch_only")  # the benchmark's do-nothing op
    assert set(ops) == {"allreduce_rmsnorm", "allreduce_rmsnorm_inplace", "allreduce", "rmsnorm_quant", "group_quant"}
    for op, args in ops.items():
        row = next((line for line in text.splitlines() if line.startswith(f"| `{op}(")), None)
        assert row is not None, f"docs/python.md has no row for the op {op}"
        if f"`{op}(...)`" in row:
            continue  # "the same arguments" as the op above it
        absent = [a for a in args if a not in row]
        assert not absent, f"docs/python.md's row for {op} does not name {absent}"
