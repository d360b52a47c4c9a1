#!/usr/bin/env bash
# Every pointer from the code, the tests and the docs to a section of a doc, written as
#   docs/NAME.md, "Section"   (or README.md, "Section"; a bare NAME.md means docs/NAME.md)
# names a heading of that file, or a bold run-in head (**Section.**) in it: a renamed section leaves no
# comment pointing nowhere. Case and line breaks inside the quoted name do not matter; a name may be the
# start of a longer heading.
source "$(dirname "$0")/lib.sh"
out=$(/usr/bin/python3 - <<'PY'
import glob, re, subprocess
files = subprocess.check_output(["git", "ls-files"], text=True).split()
def norm(text):
    return re.sub(r"\s+", " ", text).strip().lower()
anchors = {}
for doc in glob.glob("docs/*.md") + ["README.md", "bench/README.md"]:
    text = open(doc, encoding="utf-8").read()
    heads = [l.lstrip("#") for l in text.splitlines() if l.startswith("#")]
    heads += re.findall(r"\*\*([^*]{2,400}?)\.?\*\*", text)
    anchors[doc] = [norm(h) for h in heads]
pointer = re.compile(r'((?:docs/)?[\w-]+\.md),? (?:sections? )?"([^"\n]{1,80}(?:\n[^"\n]{0,80})?)"')
broken = []
for f in files:
    if not f.endswith((".cpp", ".hpp", ".h", ".cu", ".cuh", ".sh", ".py", ".md")) or f == "test/e2e/docs_sections.sh":
        continue
    text = open(f, encoding="utf-8", errors="replace").read()
    for m in pointer.finditer(text):
        doc = m.group(1) if m.group(1).startswith("docs/") or m.group(1) == "README.md" else "docs/" + m.group(1)
        if doc not in anchors:
            continue
        name = norm(re.sub(r"\n\s*(//|#)?", " ", m.group(2)))
        if not any(name in a for a in anchors[doc]):
            line = text.count("\n", 0, m.start()) + 1
            broken.append(f'{f}:{line}: {doc}, "{name}" is no section of {doc}')
print("\n".join(broken))
print(f"checked {len(files)} files")
PY
) || fail "the check itself failed: $out"
broken=$(grep -v '^checked ' <<<"$out")
[ -z "$broken" ] || fail "pointers to sections that do not exist:
$broken"
grep -q '^checked [1-9]' <<<"$out" || fail "no files were checked: $out"
pass "every docs/NAME.md, \"Section\" pointer names a section ($(grep '^checked' <<<"$out"))"
