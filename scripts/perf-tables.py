#!/usr/bin/env python3
"""The tables of docs/performance.md, rendered from `arfuse-bench ... --json` files.

  epilogue FILE   arfuse-bench epilogue [--copy-rows] [--peers PEERS.json] --json FILE:
                  shape, output, arfuse's median, the copy of its bytes, their ratio, and the
                  fastest peer row of the same shape and output (torch.compile, eager, ...)
  fused FILE      arfuse-bench fused --json FILE: the fused call against the unfused arfuse path

Every arfuse row of the file must have been checked bit-exact by the bench; a row that was not
is marked. Needs only Python's standard library.
"""
import argparse
import json
import sys
from collections import OrderedDict


def load(path):
    try:
        with open(path) as f:
            report = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"perf-tables: {path}: {e}")
    if not isinstance(report, dict) or "rows" not in report:
        sys.exit(f"perf-tables: {path}: not an arfuse-bench --json report (no 'rows')")
    return report


def shape(row):
    return f"{row['tokens']}x{row['hidden']}"


def exactness(row):
    return "" if row.get("exact") in (True, None) else " (not exact)"


def header(report, command):
    return [f"Device: {report.get('device', '?')}; copy ceiling "
            f"{report.get('copy_ceiling_bytes_per_s', 0) / 1e12:.2f} TB/s; buffers: {report.get('buffers', 'rotating')}. "
            f"Command: `{command}`", ""]


def epilogue(report, command):
    groups = OrderedDict()
    for row in report["rows"]:
        groups.setdefault((shape(row), row["out"]), []).append(row)
    lines = header(report, command) + [
        "| shape | out | arfuse µs | copy of its bytes µs | arfuse / copy | best peer µs | peer |",
        "|---|---|---:|---:|---:|---:|---|"]
    for (s, out), rows in groups.items():
        mine = next((r for r in rows if r["kernel"] == "rmsnorm_quant"), None)
        if mine is None:
            continue
        copy = next((r for r in rows if r["kernel"] == "copy, same bytes"), None)
        peers = [r for r in rows if r["kernel"] not in ("rmsnorm_quant", "copy, same bytes",
                                                         "stream, same reads and writes")]
        best = min(peers, key=lambda r: r["median_us"]) if peers else None
        lines.append("| {} | {} | {:.2f}{} | {} | {} | {} | {} |".format(
            s, out, mine["median_us"], exactness(mine),
            f"{copy['median_us']:.2f}" if copy else "",
            f"{mine['median_us'] / copy['median_us']:.2f}" if copy else "",
            f"{best['median_us']:.2f}" if best else "", best["kernel"] if best else ""))
    return lines


def fused(report, command):
    groups = OrderedDict()
    for row in report["rows"]:
        groups.setdefault((row["world"], shape(row), row["out"]), {})[row["kernel"]] = row
    lines = header(report, command) + [
        "| W | shape | out | fused µs | unfused µs | speed-up |", "|---:|---|---|---:|---:|---:|"]
    for (world, s, out), rows in groups.items():
        fused_row = next((r for k, r in rows.items() if k.startswith("fused s") and "no call check" not in k), None)
        unfused = rows.get("unfused")
        if fused_row is None or unfused is None:
            continue
        lines.append("| {} | {} | {} | {:.2f}{} | {:.2f}{} | {:.2f}x |".format(
            world, s, out, fused_row["median_us"], exactness(fused_row), unfused["median_us"], exactness(unfused),
            unfused["median_us"] / fused_row["median_us"]))
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kind", choices=["epilogue", "fused"])
    parser.add_argument("file", help="an arfuse-bench --json file")
    parser.add_argument("--command", default="", help="the command that made the file (printed above the table)")
    args = parser.parse_args()
    report = load(args.file)
    try:
        lines = (epilogue if args.kind == "epilogue" else fused)(report, args.command)
    except (KeyError, TypeError) as e:
        sys.exit(f"perf-tables: {args.file}: a row lacks {e}")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
