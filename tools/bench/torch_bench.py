#!/usr/bin/env python3
"""The PyTorch peers of `arfuse-bench epilogue`: residual add + RMSNorm (+ per-token FP8,
per-token-group FP8 with groups of 128, or MXFP4) in eager PyTorch and under torch.compile, timed the same way (a CUDA graph of 16 calls, several
replays per run, the median over runs; inputs and outputs rotate through buffers larger than L2).

    python3 tools/bench/torch_bench.py --json torch.json
    build/tools/arfuse-bench epilogue --peers torch.json     # one table, side by side

With --kernel-peers, the kernels engines call for this epilogue are timed the same way where
they are installed: FlashInfer's fused_add_rmsnorm (BF16 out), fused_add_rmsnorm_quant (static
FP8) and fused_add_rmsnorm_fp8_block_quant (FP8 in groups of 128, column-major scales), and
Liger's LigerFusedAddRMSNorm (BF16 out). Each is also run once on fresh inputs beside
arfuse.torch.rmsnorm_quant and every output compared: its row's "exact" says whether all bytes
were identical, "max_error" the largest difference in units in the last place.

Rows use arfuse-bench's JSON row format; the PyTorch rows' exactness is not measured ("n/a"):
they are timing peers that do the same work (the MXFP4 peer rounds ties by bucketize, not to
even)."""
import argparse
import json
import statistics
import sys


def parse_shapes(text):
    shapes = []
    for item in text.split(","):
        t, _, h = item.partition("x")
        # Any size torch takes; arfuse-bench checks the hidden sizes its kernels take.
        if not (t.isdigit() and h.isdigit()) or int(t) == 0 or int(h) == 0:
            sys.exit(f"bad shape '{item}': expected TOKENSxHIDDEN, both positive")
        shapes.append((int(t), int(h)))
    return shapes


def kernel_peers(names, torch, eps, fp8, static_scale):
    """{name: (quant modes it serves, fn(x, residual, weight, quant) -> outputs)} for the peers asked
    for that import; the others are reported and left out. The in-place peers update x and the
    residual as they do in an engine (the bytes moved are the same)."""
    peers = {}
    if names:
        try:
            import arfuse.torch  # noqa: F401: each peer is compared with it
        except Exception as e:  # noqa: BLE001
            sys.exit(f"--kernel-peers compares each peer with arfuse.torch, which does not import "
                     f"({type(e).__name__}: {e}): pip install . into this Python first")
    for name in filter(None, names.split(",")):
        if name == "flashinfer":
            try:
                import flashinfer.norm as fi
            except Exception as e:  # noqa: BLE001: any import failure means the peer is absent
                print(f"flashinfer: not timed ({type(e).__name__}: {e})", file=sys.stderr)
                continue

            def flashinfer_epilogue(x, r, w, quant, fi=fi):
                if quant == "none":
                    fi.fused_add_rmsnorm(x, r, w, eps)  # r += x; x = rmsnorm(r) * w
                    return r, x
                out = torch.empty(x.shape, dtype=fp8, device=x.device)
                if quant == "fp8_static":
                    fi.fused_add_rmsnorm_quant(out, x, r, w, static_scale.reshape(1), eps)
                    return r, out
                scales = torch.empty((x.shape[1] // 128, (x.shape[0] + 3) // 4 * 4), dtype=torch.float32,
                                     device=x.device)
                normed = torch.empty_like(x)
                fi.fused_add_rmsnorm_fp8_block_quant(out, scales, normed, x, r, w, eps)
                return r, out, scales[:, :x.shape[0]]

            served = ["none"] + [q for q, f in (("fp8_static", "fused_add_rmsnorm_quant"),
                                                ("fp8_group", "fused_add_rmsnorm_fp8_block_quant")) if hasattr(fi, f)]
            peers["flashinfer"] = (served, flashinfer_epilogue)
        elif name == "liger":
            try:
                from liger_kernel.transformers.fused_add_rms_norm import LigerFusedAddRMSNorm
            except Exception as e:  # noqa: BLE001
                print(f"liger: not timed ({type(e).__name__}: {e})", file=sys.stderr)
                continue
            modules = {}

            def liger_epilogue(x, r, w, quant, modules=modules, cls=LigerFusedAddRMSNorm):
                # The module holds a copy of w, found again by w's address; the entry also holds
                # w, so that the address cannot be handed to another weight while the copy lives.
                key = (w.data_ptr(), w.shape[0])
                if key not in modules:
                    m = cls(w.shape[0], eps=eps, casting_mode="llama").to(device=w.device, dtype=w.dtype)
                    m.weight.data.copy_(w)
                    modules[key] = (w, m)
                y, residual = modules[key][1](x, r)  # (normalised, x + r)
                return residual, y

            peers["liger"] = (["none"], liger_epilogue)
        else:
            sys.exit(f"--kernel-peers: '{name}' is not one of flashinfer, liger")
    return peers


def ordered(torch, t):
    """Integers in the order of t's values (sign and magnitude), for a distance in ulps."""
    kind = {1: torch.int8, 2: torch.int16, 4: torch.int32}[t.element_size()]
    bits = t.contiguous().view(kind).to(torch.int64)
    magnitude = bits & ((1 << (8 * t.element_size() - 1)) - 1)
    return torch.where(bits < 0, -magnitude, magnitude)


def compare_with_arfuse(torch, peer, fn, tokens, hidden, quant, eps, static_scale, dev, bf16):
    """The peer's outputs and arfuse.torch.rmsnorm_quant's on the same fresh inputs, output by
    output: (name, bytes identical, largest difference in ulps)."""
    import arfuse.torch as aft
    x, r = (torch.randn(tokens, hidden, device=dev).to(bf16) for _ in range(2))
    w = (torch.randn(hidden, device=dev) * 0.5).to(bf16)
    extra = {"scale": static_scale.reshape(1).float()} if quant == "fp8_static" else {}
    if quant == "fp8_group":
        extra = {"group_size": 128, "scale_layout": "column_major"}
    out, residual_out, scales, _ = aft.rmsnorm_quant(x.clone(), r.clone(), w, eps=eps, quant=quant, **extra)
    theirs = fn(x.clone(), r.clone(), w, quant)
    mine = (residual_out, out) + ((scales,) if quant == "fp8_group" else ())
    outputs = []
    for label, a, b in zip(("residual", "out", "scales"), mine, theirs):
        if a.shape != b.shape or a.dtype != b.dtype:
            outputs.append((f"{label} ({tuple(b.shape)} {b.dtype} against {tuple(a.shape)} {a.dtype})", False, -1))
            continue
        ulps = int((ordered(torch, a) - ordered(torch, b)).abs().max().item()) if a.numel() else 0
        outputs.append((label, ulps == 0 and torch.equal(a.contiguous().view(torch.uint8),
                                                          b.contiguous().view(torch.uint8)), ulps))
    return {"peer": peer, "shape": (tokens, hidden), "quant": quant, "outputs": outputs,
            "exact": all(o[1] for o in outputs), "max_ulps": max((o[2] for o in outputs), default=0)}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shapes", default="12x6144,128x8192,512x6144,2517x6144,4097x6144,2048x8192")
    p.add_argument("--quant", default="none,fp8",
                   help="none, fp8, fp8_group, mxfp4, fp8_static, nvfp4 (comma-separated; the static scale and the "
                        "NVFP4 global scale are arfuse-bench's)")
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--replays", type=int, default=20)
    p.add_argument("--json", help="write the rows here")
    p.add_argument("--kernel-peers", default="",
                   help="comma-separated: flashinfer, liger (timed and compared with arfuse where installed)")
    p.add_argument("--fixed-inputs", action="store_true",
                   help="every call reads the same inputs and writes the same outputs (what fits stays in the "
                        "L2), as arfuse-bench epilogue --fixed-inputs; by default both rotate through more than "
                        "the L2")
    args = p.parse_args()
    try:
        import torch
    except ImportError:
        sys.exit("PyTorch is not installed")
    if not torch.cuda.is_available():
        sys.exit("no CUDA device")
    dev = torch.device("cuda")
    bf16 = torch.bfloat16
    fp8 = torch.float8_e4m3fn
    fp8_max = torch.finfo(fp8).max
    eps = 1e-6

    e2m1_edges = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], device=dev)

    def fp8_by_blocks(y, block):
        b = y.float().unflatten(-1, (-1, block))
        scale = b.abs().amax(-1, keepdim=True) / fp8_max
        q = (b / torch.where(scale > 0, scale, torch.ones_like(scale))).clamp(-fp8_max, fp8_max).to(fp8)
        return q.flatten(-2), scale.squeeze(-1)

    def mxfp4(y):
        b = y.float().unflatten(-1, (-1, 32))
        e = (torch.floor(torch.log2(b.abs().amax(-1, keepdim=True))) - 2).clamp(-127, 127)
        v = b * torch.exp2(-e)
        code = torch.bucketize(v.abs().clamp(max=6.0), e2m1_edges).to(torch.uint8) | (v < 0).to(torch.uint8) << 3
        code = code.flatten(-2)
        return code[..., 0::2] | code[..., 1::2] << 4, (e.squeeze(-1) + 127).to(torch.uint8)

    static_scale = torch.tensor(0.0123, device=dev)  # arfuse-bench's bench_quant_scale
    global_scale = torch.tensor(448.0 * 6.0 / 8.0, device=dev)

    def fp8_static(y):
        return (y.float() * (1.0 / static_scale)).clamp(-fp8_max, fp8_max).to(fp8), static_scale

    def nvfp4(y):
        # Blocks of 16, scale e4m3(global * amax / 6), elements y / (scale / global) on E2M1,
        # scales linear [tokens, hidden / 16] (arfuse's bench writes the swizzled layout: same bytes).
        b = y.float().unflatten(-1, (-1, 16))
        s = (global_scale * (b.abs().amax(-1, keepdim=True) * (1.0 / 6.0))).clamp(max=fp8_max).to(fp8)
        sf = s.float()
        v = b * torch.where(sf != 0, 1.0 / (sf * (1.0 / global_scale)), torch.zeros_like(sf))
        code = torch.bucketize(v.abs().clamp(max=6.0), e2m1_edges).to(torch.uint8) | (v < 0).to(torch.uint8) << 3
        code = code.flatten(-2)
        return code[..., 0::2] | code[..., 1::2] << 4, s.squeeze(-1)

    def epilogue(x, residual, weight, quant):
        h = (x.float() + residual.float()).to(bf16)
        y = (h.float() * torch.rsqrt(h.float().pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(bf16)
        if quant == "none":
            return h, y
        if quant == "mxfp4":
            return (h, *mxfp4(y))
        if quant == "fp8_static":
            return (h, *fp8_static(y))
        if quant == "nvfp4":
            return (h, *nvfp4(y))
        return (h, *fp8_by_blocks(y, 128 if quant == "fp8_group" else y.shape[-1]))

    compiled = torch.compile(epilogue, dynamic=False)
    peers = kernel_peers(args.kernel_peers, torch, eps, fp8, static_scale)
    numerics = []
    quants = args.quant.split(",")
    for q in quants:
        if q not in ("none", "fp8", "fp8_group", "mxfp4", "fp8_static", "nvfp4"):
            sys.exit(f"--quant: '{q}' is not one of none, fp8, fp8_group, mxfp4, fp8_static, nvfp4")
    # Every row recompiles the one epilogue function; past dynamo's limit (8) it would silently
    # run eager, so lift the limit above the number of rows.
    for limit in ("cache_size_limit", "recompile_limit"):
        if hasattr(torch._dynamo.config, limit):
            setattr(torch._dynamo.config, limit, 256)
    rows = []
    print("| kernel | shape | out | median µs | min-max µs |\n|---|---|---|---:|---:|")
    for tokens, hidden in parse_shapes(args.shapes):
        n = tokens * hidden
        for quant in quants:
            out_bytes = {"none": n * 2, "fp8": n + tokens * 4, "fp8_group": n + tokens * (hidden // 128) * 4,
                         "mxfp4": n // 2 + tokens * (hidden // 32), "fp8_static": n,
                         "nvfp4": n // 2 + tokens * (hidden // 16)}[quant]
            call_bytes = n * 2 * 3 + out_bytes + hidden * 2
            k = 1 if args.fixed_inputs else max(1, min(16, (256 << 20) // call_bytes + 1))
            sets = [(torch.randn(tokens, hidden, device=dev).to(bf16), torch.randn(tokens, hidden, device=dev).to(bf16))
                    for _ in range(k)]
            weight = (torch.randn(hidden, device=dev) * 0.5).to(bf16)
            timed = [("torch eager", epilogue), ("torch.compile", compiled)]
            timed += [(name, fn) for name, (quants_of, fn) in peers.items() if quant in quants_of]
            for name, _ in timed[2:]:
                numerics.append(compare_with_arfuse(torch, name, peers[name][1], tokens, hidden, quant, eps,
                                                    static_scale, dev, bf16))
            for name, fn in timed:
                for x, r in sets[:2]:
                    fn(x, r, weight, quant)  # compile and warm up outside the graph
                torch.cuda.synchronize()
                stream = torch.cuda.Stream()
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.stream(stream):
                    with torch.cuda.graph(graph, stream=stream):
                        # The outputs rotate through k sets like the inputs (and like
                        # arfuse-bench's): call c's outputs live until call c + k, so the graph's
                        # pool gives the next k calls other memory. Dropping each call's outputs
                        # at once would let all 16 calls write the same buffers, which stay in L2.
                        held = []
                        for c in range(16):
                            if len(held) == k:
                                held.pop(0)
                            x, r = sets[c % k]
                            held.append(fn(x, r, weight, quant))
                        del held
                for _ in range(args.replays):
                    graph.replay()
                torch.cuda.synchronize()
                samples = []
                for _ in range(args.runs):
                    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record()
                    for _ in range(args.replays):
                        graph.replay()
                    stop.record()
                    stop.synchronize()
                    samples.append(start.elapsed_time(stop) * 1000 / (args.replays * 16))
                out = {"none": "bf16", "fp8_group": "fp8_group128"}.get(quant, quant)  # arfuse-bench's names
                compared = next((c for c in numerics if c["peer"] == name and c["shape"] == (tokens, hidden)
                                 and c["quant"] == quant), None)
                rows.append({"kernel": name, "world": 1, "tokens": tokens, "hidden": hidden, "out": out,
                             "median_us": statistics.median(samples), "min_us": min(samples), "max_us": max(samples),
                             "bytes": call_bytes, "exact": compared["exact"] if compared else None,
                             "max_error": compared["max_ulps"] if compared else 0, "resources": ""})
                print(f"| {name} | {tokens}x{hidden} | {out} | {statistics.median(samples):.2f} | "
                      f"{min(samples):.2f}-{max(samples):.2f} |", flush=True)
    if numerics:
        print("\n| peer | shape | out | output | bytes identical | largest difference (ulps) |\n|---|---|---|---|---|---:|")
        for c in numerics:
            for output, identical, ulps in c["outputs"]:
                print(f"| {c['peer']} | {c['shape'][0]}x{c['shape'][1]} | {c['quant']} | {output} | "
                      f"{'yes' if identical else 'no'} | {ulps} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"tool": "torch_bench.py", "torch": torch.__version__, "device": torch.cuda.get_device_name(),
                       "buffers": "fixed inputs" if args.fixed_inputs else "rotating", "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
