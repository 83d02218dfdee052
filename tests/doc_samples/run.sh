#!/usr/bin/env bash
# Every ```cpp block in README.md and docs/*.md compiles against this build
# (issue 25): a block with `int main(` is a program of its own; any other
# block is a fragment, compiled inside a function that has a
# `sqlguard::Connection& conn` (its #include lines are hoisted). A block
# right after a line `<!-- sample: run -->` is a program that is also RUN
# (in a temporary directory, so it can use an SQLite file there).
# Usage: run.sh SOURCE_DIR BUILD_DIR WORK_DIR
set -euo pipefail
src=$1 build=$2 work=$3
rm -rf "$work"
mkdir -p "$work"
cxx=${CXX:-c++}
flags=(-std=c++20 -I"$src/include" -L"$build" -Wl,-rpath,"$build" -lsqlguard -pthread)
fail=0 blocks=0 ran=0

# Splits one Markdown file into numbered blocks: $work/<tag>_<n>.{frag,main,run}
split_blocks() { # file tag
  awk -v out="$work/$2" '
    /^<!-- sample: run -->/ { run = 1; next }
    /^```cpp[ \t]*$/ { inblock = 1; n++; body = ""; next }
    inblock && /^```[ \t]*$/ {
      inblock = 0
      kind = (body ~ /int main\(/) ? (run ? "run" : "main") : "frag"
      f = sprintf("%s_%02d.%s", out, n, kind); printf "%s", body > f; close(f)
      run = 0; next
    }
    inblock { body = body $0 "\n"; next }
    /[^ \t]/ { run = 0 }
  ' "$1"
}

compile() { # cpp-file what
  if ! "$cxx" "$1" "${flags[@]}" -o "${1%.cpp}" 2>"${1%.cpp}.err"; then
    echo "doc_samples: FAIL: $2 does not compile:" >&2
    head -20 "${1%.cpp}.err" >&2
    fail=1
    return 1
  fi
}

# Negative control: the sample README.md had before issue 25 (a bool where
# the watchdog is an enum) must not compile here, or this test proves nothing.
{
  cat "$src/tests/doc_samples/prelude.h"
  printf 'static void bad(sqlguard::LeaseOptions o) {\n'
  printf '  sqlguard::LeaseLock lock("sqlite::memory:", "nightly-report", o, /*watchdog=*/true);\n}\nint main() {}\n'
} >"$work/negative-control.cpp"
if "$cxx" "$work/negative-control.cpp" "${flags[@]}" -o "$work/negative-control" 2>/dev/null; then
  echo "doc_samples: FAIL: the negative control (a sample that must not compile) compiled" >&2
  exit 1
fi

docs=("$src/README.md")
for f in "$src"/docs/*.md; do docs+=("$f"); done
for doc in "${docs[@]}"; do
  rel=${doc#"$src"/}
  tag=$(echo "$rel" | tr '/.' '__')
  split_blocks "$doc" "$tag"
  frags=("$work/$tag"_*.frag)
  if [[ -e "${frags[0]}" ]]; then
    tu="$work/$tag-fragments.cpp"
    {
      cat "$src/tests/doc_samples/prelude.h"
      cat "${frags[@]}" | grep -h '^#include' || true
      for fr in "${frags[@]}"; do
        n=$(basename "$fr" .frag)
        printf '\n// ---- %s, block %s\n[[maybe_unused]] static void sample_%s(sqlguard::Connection& conn) {\n  (void)conn;\n' "$rel" "${n##*_}" "${n##*_}"
        grep -v '^#include' "$fr"
        printf '}\n'
      done
      printf 'int main() { return 0; }\n'
    } >"$tu"
    blocks=$((blocks + ${#frags[@]}))
    compile "$tu" "$rel (fragments)" || true
  fi
  for prog in "$work/$tag"_*.main "$work/$tag"_*.run; do
    [[ -e "$prog" ]] || continue
    cpp="${prog%.*}-${prog##*.}.cpp"
    cp "$prog" "$cpp"
    blocks=$((blocks + 1))
    compile "$cpp" "$rel block $(basename "${prog%.*}" | sed 's/.*_//')" || continue
    if [[ "$prog" == *.run ]]; then
      dir=$(mktemp -d)
      if ! (cd "$dir" && timeout 120 "${cpp%.cpp}" >"$dir/out" 2>&1); then
        echo "doc_samples: FAIL: $rel block $(basename "${prog%.*}" | sed 's/.*_//') exits non-zero:" >&2
        tail -20 "$dir/out" >&2
        fail=1
      fi
      ran=$((ran + 1))
      rm -rf "$dir"
    fi
  done
done
echo "doc_samples: $blocks C++ blocks compiled, $ran run, from README.md and docs/*.md" >&2
(( blocks > 0 )) || { echo "doc_samples: FAIL: no C++ block found" >&2; exit 1; }
exit "$fail"
