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
    /^<!-- sample: run -->/ { run = 1; fixture = ""; next }
    /^<!-- sample: run fixture=[a-z0-9_-]+ check=[a-z0-9_-]+ -->/ {
      run = 1; fixture = $4 " " $5; sub(/fixture=/, "", fixture); sub(/check=/, "", fixture); next
    }
    /^```cpp[ \t]*$/ { inblock = 1; n++; body = ""; next }
    inblock && /^```[ \t]*$/ {
      inblock = 0
      if (body ~ /int main\(/) kind = run ? "run" : "main"
      else kind = "frag"
      f = sprintf("%s_%02d.%s", out, n, kind); printf "%s", body > f; close(f)
      if (kind == "frag" && run && fixture != "") {
        f = sprintf("%s_%02d.fixture", out, n); print fixture > f; close(f)
      }
      run = 0; fixture = ""; next
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

# Builds one fragment into a program whose `conn` is shop.db with the fixture
# applied, runs it in a temporary directory and checks the fixture's
# expectations afterwards.
run_fragment() { # frag-file fixture-name check-name doc
  local fr=$1 fixture=$2 check=$3 rel=$4 n cpp dir sqlfile
  n=$(basename "$fr" .frag); n=${n##*_}
  sqlfile="$src/tests/doc_samples/fixtures/$fixture.sql"
  [[ -e "$sqlfile" ]] || { echo "doc_samples: FAIL: $rel block $n: no fixture $sqlfile" >&2; fail=1; return 1; }
  cpp="${fr%.frag}-run.cpp"
  {
    cat "$src/tests/doc_samples/prelude.h"
    grep -h '^#include' "$fr" || true
    printf '#include <fstream>\n#include <sstream>\n'
    printf 'static void sample(sqlguard::Connection& conn) {\n'
    grep -v '^#include' "$fr" || true  # a block of #include lines only has no body
    printf '}\n'
    cat <<'PROGRAM'
// Statements end with ';' at the end of a line; the line `-- check NAME: Q`
// named by argv[2] is run after the fragment and must answer 1.
int main(int argc, char** argv) {
  if (argc != 3) return 2;
  try {
    auto conn = sqlguard::make_connection("sqlite://shop.db");
    sqlguard::migrate(*conn);
    std::ifstream in(argv[1]);
    std::string line, stmt;
    const std::string tag = std::string("-- check ") + argv[2] + ": ";
    std::string check;
    while (std::getline(in, line)) {
      if (line.rfind(tag, 0) == 0) { check = line.substr(tag.size()); continue; }
      if (line.rfind("--", 0) == 0) continue;
      stmt += line + "\n";
      if (!line.empty() && line.back() == ';') { conn->execute(stmt.substr(0, stmt.rfind(';'))); stmt.clear(); }
    }
    if (check.empty()) { std::cerr << "no line '" << tag << "' in " << argv[1] << "\n"; return 1; }
    sample(*conn);
    auto r = conn->execute(check);
    if (r.rows.empty() || r.rows[0].size() == 0 || r.rows[0][0].as_int() != 1) {
      std::cerr << "check failed after the fragment ran: " << check << "\n";
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "threw: " << e.what() << "\n";
    return 1;
  }
}
PROGRAM
  } >"$cpp"
  compile "$cpp" "$rel block $n (run with fixture $fixture)" || return 1
  dir=$(mktemp -d)
  local rc=0
  (cd "$dir" && timeout 120 "${cpp%.cpp}" "$sqlfile" "$check" >"$dir/out" 2>&1) || rc=1
  cp "$dir/out" "$work/last-run.out"
  rm -rf "$dir"
  ran=$((ran + 1))
  if ((rc)); then
    echo "doc_samples: FAIL: $rel block $n (fixture $fixture) fails when run:" >&2
    tail -20 "$work/last-run.out" >&2
    fail=1
  fi
  return "$rc"
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

# Negative control of the fragment runs: a fragment that does nothing must
# fail the check `paid` (or the checks prove nothing).
printf '(void)conn;\n' >"$work/control_01.frag"
saved_fail=$fail saved_ran=$ran
if run_fragment "$work/control_01.frag" shop paid "negative control" 2>/dev/null ||
  ! grep -q "check failed after the fragment ran" "$work/last-run.out"; then
  echo "doc_samples: FAIL: a fragment that does nothing did not fail the check 'paid'" >&2
  exit 1
fi
fail=$saved_fail ran=$saved_ran

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
        grep -v '^#include' "$fr" || true  # a block of #include lines only has no body
        printf '}\n'
      done
      printf 'int main() { return 0; }\n'
    } >"$tu"
    blocks=$((blocks + ${#frags[@]}))
    compile "$tu" "$rel (fragments)" || true
    for fr in "${frags[@]}"; do
      fx="${fr%.frag}.fixture"
      [[ -e "$fx" ]] || continue
      read -r fixture check <"$fx"
      run_fragment "$fr" "$fixture" "$check" "$rel" || true
    done
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
