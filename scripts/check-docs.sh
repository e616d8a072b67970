#!/usr/bin/env bash
# The documentation's own checks, run by CI:
#   - README.md is at most 200 lines;
#   - every relative link in README.md, CONTRIBUTING.md, CHANGELOG.md and docs/*.md resolves;
#   - no tracked file speaks of how the product was developed: numbered development rounds or
#     sessions, issue numbers, who lent which machine, the diary of measurements, paths of a build
#     environment, and (in Markdown) commit hashes;
#   - every repository path a code file names (in a comment, docstring or message) exists;
#   - every test file under tests/cpu, tests/gpu and tests/emulated is named after the unit it
#     tests: a file or folder of arfuse/, include/arfuse/ or tools/ (plus one `_word` for a second
#     view of it, as cache_hostile.cpp);
#   - README's C++ quick start is examples/quickstart.cpp, character for character;
#   - with --tools DIR: each tool's --help lists exactly the options docs/tools.md gives it.
# --self-test runs the checks on a copy of the tree, then on copies with a planted development
# word, a dead link, a comment naming a missing file, a test file named after no unit and a
# 201-line README, and fails unless the first passes and the others fail.
# Usage: scripts/check-docs.sh [--root DIR] [--tools DIR] [--self-test]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tools="" self_test=0
while [ $# -gt 0 ]; do
  case "$1" in
    --root) root=$(cd "${2:?--root takes a folder}" && pwd); shift 2 ;;
    --tools) tools=$(cd "${2:?--tools takes a folder}" && pwd); shift 2 ;;
    --self-test) self_test=1; shift ;;
    -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "check-docs.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done

if [ "$self_test" = 1 ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  copy() {  # a copy of the tracked tree (with uncommitted changes) in $work/$1
    mkdir -p "$work/$1"
    (cd "$root" && git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$work/$1" 2>/dev/null || true)
    (cd "$work/$1" && git init -q && git add -A)
  }
  expect() {  # expect pass|fail, a label, a copy's name
    local want=$1 label=$2 status=0
    "$0" --root "$work/$3" > "$work/$3.log" 2>&1 || status=$?
    if { [ "$want" = pass ] && [ "$status" = 0 ]; } || { [ "$want" = fail ] && [ "$status" = 1 ]; }; then
      echo "self-test: $label: $([ "$want" = pass ] && echo passes || echo fails), as it should"
    else
      echo "self-test: $label: expected to $want, exit status $status:"; cat "$work/$3.log"; exit 1
    fi
  }
  copy clean && expect pass "the tree as it is" clean
  copy word && echo "Measured in the third session." >> "$work/word/docs/architecture.md" && (cd "$work/word" && git add -A)
  expect fail "a development-round word" word
  copy link && echo "See [the missing page](docs/missing.md)." >> "$work/link/README.md" && (cd "$work/link" && git add -A)
  expect fail "a dead link" link
  copy path && echo "// The rest is in arfuse/jit/no_such_file.cpp." >> "$work/path/arfuse/jit/render.cpp" && (cd "$work/path" && git add -A)
  expect fail "a comment naming a file that is not there" path
  copy unit && printf 'TEST_CASE("x", "[cpu]") {}\n' > "$work/unit/tests/cpu/odds_and_ends.cpp" && (cd "$work/unit" && git add -A)
  expect fail "a test file named after no unit" unit
  copy long && lines=$(wc -l < "$work/long/README.md") &&
    for _ in $(seq "$lines" 200); do echo >> "$work/long/README.md"; done && (cd "$work/long" && git add -A)
  expect fail "a 201-line README" long
  exit 0
fi

exec python3 - "$root" "$tools" <<'PY'
import os, re, subprocess, sys

root, tools = sys.argv[1], sys.argv[2]
failures = []

files = subprocess.run(["git", "-C", root, "ls-files", "--cached", "--others", "--exclude-standard"],
                       check=True, capture_output=True, text=True).stdout.split("\n")
files = [f for f in files if f and os.path.isfile(os.path.join(root, f))]

readme = os.path.join(root, "README.md")
lines = sum(1 for _ in open(readme, encoding="utf-8"))
if lines > 200:
    failures.append(f"README.md: {lines} lines; at most 200")

# Words and paths of how the product was developed. This script names them, so it is exempt.
ordinal = ("first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|"
           "thirteenth|fourteenth|fifteenth|sixteenth|seventeenth|eighteenth|nineteenth|twentieth|\\d+(?:st|nd|rd|th)")
forbidden = [
    (re.compile(rf"\b(?:{ordinal}) (?:session|round)s?\b", re.I), "a numbered development session or round"),
    (re.compile(r"\bsession \d+\b", re.I), "a numbered development session or round"),
    (re.compile(r"\bdevelopment rounds?\b", re.I), "development rounds"),
    (re.compile(r"\bissues? #?\d+", re.I), "an issue number"),
    (re.compile(r"\b(?:lent|device loans?)\b", re.I), "which machine was lent"),
    (re.compile(r"\bGPU machine\b", re.I), "the development GPU machine"),
    (re.compile(r"performance-notes|notes section", re.I), "the measurement diary"),
    (re.compile(r"/tmp/dd\b|\$OUT\b|\$\{OUT\b|/opt/torch|\.\./shared|\.devdeps|/work/main"), "a path of the build environment"),
]
commit_hash = re.compile(r"(?<![0-9A-Za-z_./#-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}(?![0-9A-Za-z_])")
exempt = {"scripts/check-docs.sh", "LICENSE"}
for f in files:
    if f in exempt or f.endswith((".svg", ".json", ".deb", ".whl")):
        continue
    try:
        text = open(os.path.join(root, f), encoding="utf-8").read()
    except (UnicodeDecodeError, IsADirectoryError):
        continue
    for n, line in enumerate(text.split("\n"), 1):
        for pattern, what in forbidden:
            m = pattern.search(line)
            if m:
                failures.append(f"{f}:{n}: {what}: '{m.group(0)}'")
        if f.endswith(".md"):
            m = commit_hash.search(line)
            if m:
                failures.append(f"{f}:{n}: a commit hash: '{m.group(0)}'")

# Repository paths named in code, comments, docstrings and messages must exist. A path counts when
# it has a folder and its first folder is one of the repository's (arfuse/jit/x.cpp, or
# runtime/x.hpp inside arfuse/); it resolves when some file or folder of the tree ends with it.
own_folders = set()
for f in files:
    parts = f.split("/")[:-1]
    own_folders.update(parts)
tree = set(files)
for f in files:
    parts = f.split("/")
    tree.update("/".join(parts[:i]) for i in range(1, len(parts)))
repo_path = re.compile(r"(?<![\w./:-])((?:[A-Za-z_][\w-]*/)+[\w-]+\.(?:cpp|hpp|cuh|py|sh|md|cmake|json|txt))(?![\w/]|\.\w)")
placeholder = re.compile(r"(?:^|/)(?:x|[A-Z]+)(?:/|\.)")  # arfuse/LAYER/x.hpp: a pattern, not a file
source_kinds = (".cpp", ".hpp", ".cuh", ".py", ".sh", ".cmake", ".txt", ".toml")
for f in files:
    if f in exempt or not f.endswith(source_kinds):
        continue
    try:
        text = open(os.path.join(root, f), encoding="utf-8").read()
    except UnicodeDecodeError:
        continue
    for n, line in enumerate(text.split("\n"), 1):
        for path in repo_path.findall(line):
            if path.split("/")[0] not in own_folders or "#include" in line or placeholder.search(path):
                continue  # another project's path, or an include the compiler checks
            if not any(t == path or t.endswith("/" + path) for t in tree):
                failures.append(f"{f}:{n}: names {path}, which is not in the repository")

# Test files are named after the unit they test (CONTRIBUTING.md, "Tests").
units = set()
for f in files:
    if f.startswith(("arfuse/", "include/arfuse/", "tools/")):
        parts = f.split("/")
        units.update(parts[1:-1])
        units.add(parts[-1].split(".")[0])
for f in files:
    parts = f.split("/")
    if len(parts) != 3 or parts[0] != "tests" or parts[1] not in ("cpu", "gpu", "emulated") or not f.endswith(".cpp"):
        continue
    if "TEST_CASE(" not in open(os.path.join(root, f), encoding="utf-8").read():
        continue  # a helper of the tests, not a test file
    stem = parts[2][:-4]
    if stem not in units and stem.rsplit("_", 1)[0] not in units:
        failures.append(f"{f}: named after no file or folder of arfuse/, include/arfuse/ or tools/")

# Relative links of the Markdown pages a reader follows.
link = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
pages = [f for f in files if f in ("README.md", "CONTRIBUTING.md", "CHANGELOG.md") or
         (f.startswith("docs/") and f.endswith(".md"))]
for f in pages:
    for n, line in enumerate(open(os.path.join(root, f), encoding="utf-8").read().split("\n"), 1):
        for target in link.findall(line):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            path = target.split("#", 1)[0]
            resolved = os.path.normpath(os.path.join(root, os.path.dirname(f), path))
            if not os.path.exists(resolved):
                failures.append(f"{f}:{n}: dead link '{target}'")

# README's C++ quick start is examples/quickstart.cpp, which CI builds.
readme_text = open(readme, encoding="utf-8").read()
block = re.search(r"^## Quick start \(C\+\+\)$.*?^```cpp\n(.*?)^```$", readme_text, re.M | re.S)
quickstart = os.path.join(root, "examples", "quickstart.cpp")
if not block:
    failures.append("README.md: no ```cpp block under '## Quick start (C++)'")
elif not os.path.exists(quickstart) or block.group(1) != open(quickstart, encoding="utf-8").read():
    failures.append("README.md: the C++ quick start differs from examples/quickstart.cpp")

# Each tool's --help against its section of docs/tools.md.
if tools:
    doc = open(os.path.join(root, "docs", "tools.md"), encoding="utf-8").read()
    option = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
    for tool in ("arfuse-warmup", "arfuse-cache", "arfuse-bench"):
        run = subprocess.run([os.path.join(tools, tool), "--help"], capture_output=True, text=True)
        if run.returncode != 0:
            failures.append(f"{tool} --help: exit status {run.returncode}")
            continue
        in_help = set(option.findall(run.stdout))
        m = re.search(rf"^## `?{tool}`?\s*$(.*?)(?=^## |\Z)", doc, re.M | re.S)
        if not m:
            failures.append(f"docs/tools.md: no section '## {tool}'")
            continue
        in_doc = set(option.findall(m.group(1)))
        in_help.discard("--help"), in_doc.discard("--help")  # every tool takes it
        for o in sorted(in_help - in_doc):
            failures.append(f"docs/tools.md: {tool}'s {o} (in its --help) is not documented")
        for o in sorted(in_doc - in_help):
            failures.append(f"docs/tools.md: {tool}'s {o} is not in its --help")

for line in failures:
    print(line)
checked = f"{len(files)} files, {len(pages)} pages" + (", the tools' --help" if tools else "")
if failures:
    print(f"check-docs: {len(failures)} problem(s) ({checked})")
    sys.exit(1)
print(f"check-docs: ok ({checked})")
PY
