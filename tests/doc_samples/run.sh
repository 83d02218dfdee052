#!/usr/bin/env bash
# Every ```cpp block in README.md and docs/*.md compiles against this build
# as a reader would paste it (issues 25 and 39), with -Wall -Wextra -Werror:
#   * a block with `int main(` is a program of its own, compiled as it is;
#   * any other block is a fragment: the body of a function that is given a
#     `sqlguard::Connection& conn` (so <sqlguard/connection.h> is included
#     for it) and nothing else. Its own #include lines go to the top of its
#     translation unit; everything else it uses (headers, `using namespace
#     std::chrono_literals;`) must be written in the block. Each fragment is
#     its own translation unit: one block's includes never help another.
# A block right after a line `<!-- sample: run ... -->` is also RUN, in a
# temporary directory of its own (so it can use an SQLite file there):
#   <!-- sample: run -->                       a program; must exit 0
#   <!-- sample: run fixture=F check=C -->     a fragment: its `conn` is
#       shop.db with tests/doc_samples/fixtures/F.sql applied; afterwards the
#       fixture's query `-- check C:` must answer 1
#   expect="TEXT"                              the output must contain TEXT
#   processes=N sum=WORD total=T               N copies run at once in one
#       directory; the integers after WORD in their outputs add up to T
# Usage: run.sh SOURCE_DIR BUILD_DIR WORK_DIR
set -euo pipefail
src=$1 build=$2 work=$3
rm -rf "$work"
mkdir -p "$work"
cxx=${CXX:-c++}
flags=(-std=c++20 -Wall -Wextra -Werror -I"$src/include" -L"$build" -Wl,-rpath,"$build" -lsqlguard -pthread)
fail=0 blocks=0 ran=0

# Splits one Markdown file into numbered blocks: $work/<tag>_<n>.{frag,main}
# and, for a block marked to run, $work/<tag>_<n>.meta (the marker's words).
split_blocks() { # file tag
  awk -v out="$work/$2" '
    /^<!-- sample: run( [^>]*)? -->[ \t]*$/ {
      run = 1; meta = $0; sub(/^<!-- sample: run ?/, "", meta); sub(/ ?-->[ \t]*$/, "", meta); next
    }
    /^```cpp[ \t]*$/ { inblock = 1; n++; body = ""; next }
    inblock && /^```[ \t]*$/ {
      inblock = 0
      kind = body ~ /int main\(/ ? "main" : "frag"
      f = sprintf("%s_%02d.%s", out, n, kind); printf "%s", body > f; close(f)
      if (run) { f = sprintf("%s_%02d.meta", out, n); print meta > f; close(f) }
      run = 0; meta = ""; next
    }
    inblock { body = body $0 "\n"; next }
    /[^ \t]/ { run = 0 }
  ' "$1"
}

# One word of a marker: `key=value` or `key="value with spaces"`.
meta_get() { # meta-text key
  local re1="(^| )$2=\"([^\"]*)\"" re2="(^| )$2=([^ \"]+)"
  if [[ $1 =~ $re1 ]]; then echo "${BASH_REMATCH[2]}"
  elif [[ $1 =~ $re2 ]]; then echo "${BASH_REMATCH[2]}"
  fi
}

# Compiles one translation unit (unless prebuild already did) and reports
# it: 0 when it compiled.
compile() { # cpp-file what
  local out=${1%.cpp}
  if [[ ! -e "$out.prebuilt" ]]; then
    rm -f "$out.failed"
    "$cxx" "$1" "${flags[@]}" -o "$out" 2>"$out.err" || touch "$out.failed"
  fi
  if [[ -e "$out.failed" ]]; then
    echo "doc_samples: FAIL: $2 does not compile (as pasted, -Wall -Wextra -Werror):" >&2
    head -20 "$out.err" >&2
    fail=1
    return 1
  fi
}

# Compiles translation units nproc at a time (the compiler is most of this
# test's time); compile() then reports each in the documents' order.
prebuild() { # cpp-file...
  local cpp jobs_max
  jobs_max=$(nproc)
  for cpp in "$@"; do
    while (( $(jobs -rp | wc -l) >= jobs_max )); do wait -n || true; done
    ( out=${cpp%.cpp}
      "$cxx" "$cpp" "${flags[@]}" -o "$out" 2>"$out.err" || touch "$out.failed"
      touch "$out.prebuilt" ) &
  done
  wait
}

# A fragment as its own translation unit: its includes, the one header its
# `conn` needs, the fragment as the body of sample(). `tail` (a file) is
# appended after sample(): what comes there (a main that runs it) adds no
# name the fragment could use.
fragment_tu() { # frag-file tail-file
  grep -h '^#include' "$1" || true
  printf '#include <sqlguard/connection.h>\n'
  printf '[[maybe_unused]] static void sample(sqlguard::Connection& conn) {\n  (void)conn;\n'
  grep -v '^#include' "$1" || true  # a block of #include lines only has no body
  printf '}\n'
  cat "$2"
}

# The main that runs a fragment on shop.db: statements of the fixture end
# with ';' at the end of a line; the line `-- check NAME: Q` named by argv[2]
# is run after the fragment and must answer 1.
cat >"$work/run-main.inc" <<'PROGRAM'
#include <fstream>
#include <iostream>
#include <sqlguard/migrate.h>
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
printf 'int main() { return 0; }\n' >"$work/empty-main.inc"

# Runs a built sample as its marker says; 0 when it did what the text says.
# A program takes no arguments; a fragment's program takes the fixture file
# and the check's name.
run_built() { # binary meta what [fixture-file check]
  local bin=$1 meta=$2 what=$3 dir rc=0 expect procs sum total got i
  shift 3
  expect=$(meta_get "$meta" expect)
  procs=$(meta_get "$meta" processes)
  procs=${procs:-1}
  dir=$(mktemp -d)
  local pids=()
  for ((i = 0; i < procs; i++)); do
    (cd "$dir" && timeout 120 "$bin" "$@" >"$dir/out.$i" 2>&1) &
    pids+=($!)
  done
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || { rc=1; echo "doc_samples: FAIL: $what: process $i of $procs exits non-zero:" >&2; tail -20 "$dir/out.$i" >&2; }
  done
  cat "$dir"/out.* >"$work/last-run.out"
  if ((rc == 0)) && [[ -n $expect ]] && ! grep -qF -- "$expect" "$work/last-run.out"; then
    rc=1
    echo "doc_samples: FAIL: $what: its output does not contain \"$expect\" (the text says it does):" >&2
    tail -20 "$work/last-run.out" >&2
  fi
  sum=$(meta_get "$meta" sum)
  if ((rc == 0)) && [[ -n $sum ]]; then
    total=$(meta_get "$meta" total)
    got=$(grep -ho -- "$sum [0-9]*" "$dir"/out.* | awk '{ s += $2 } END { print s + 0 }')
    if [[ $got != "$total" ]]; then
      rc=1
      echo "doc_samples: FAIL: $what: $procs processes at once: '$sum' adds up to $got, the text says $total" >&2
      cat "$dir"/out.* >&2
    fi
  fi
  rm -rf "$dir"
  ran=$((ran + 1))
  return "$rc"
}

# A fragment marked to run: built with the fixture's main, run, checked.
run_fragment() { # frag-file meta what
  local fr=$1 meta=$2 what=$3 fixture check sqlfile cpp
  fixture=$(meta_get "$meta" fixture) check=$(meta_get "$meta" check)
  [[ -n $fixture && -n $check ]] || { echo "doc_samples: FAIL: $what: a fragment to run needs fixture= and check=" >&2; fail=1; return 1; }
  sqlfile="$src/tests/doc_samples/fixtures/$fixture.sql"
  [[ -e "$sqlfile" ]] || { echo "doc_samples: FAIL: $what: no fixture $sqlfile" >&2; fail=1; return 1; }
  cpp="${fr%.frag}-run.cpp"
  [[ -e "$cpp" ]] || fragment_tu "$fr" "$work/run-main.inc" >"$cpp"  # (prebuilt: written before)
  compile "$cpp" "$what" || return 1
  run_built "${cpp%.cpp}" "$meta" "$what (fixture $fixture, check $check)" "$sqlfile" "$check" || { fail=1; return 1; }
}

# Negative controls: each must fail, or the test proves nothing.
# 1. The sample README.md had before issue 25 (a bool where the watchdog is
#    an enum) must not compile.
printf '#include <sqlguard/lease_lock.h>\n' >"$work/control_01.frag"
printf 'sqlguard::LeaseLock lock("sqlite::memory:", "nightly-report", {}, /*watchdog=*/true);\n' >>"$work/control_01.frag"
fragment_tu "$work/control_01.frag" "$work/empty-main.inc" >"$work/control-1.cpp"
if "$cxx" "$work/control-1.cpp" "${flags[@]}" -o "$work/control-1" 2>/dev/null; then
  echo "doc_samples: FAIL: negative control 1 (a sample that must not compile) compiled" >&2
  exit 1
fi
# 2. A fragment that uses a header it does not include (issue 39: the old
#    harness's hidden prelude gave every fragment all of them) must not compile.
printf 'sqlguard::Inbox inbox(conn);\n' >"$work/control_02.frag"
fragment_tu "$work/control_02.frag" "$work/empty-main.inc" >"$work/control-2.cpp"
if "$cxx" "$work/control-2.cpp" "${flags[@]}" -o "$work/control-2" 2>/dev/null; then
  echo "doc_samples: FAIL: negative control 2 (a fragment without its #include) compiled" >&2
  exit 1
fi
# 3. Designated initializers naming one field of an option struct compile
#    without -Wmissing-field-initializers; a struct member without a default
#    member initializer would warn, and -Werror must make that fail.
printf '#include <string>\nstruct Opt { int a = 0; std::string b; };\nint main() { Opt o{.a = 1}; return o.a; }\n' >"$work/control-3.cpp"
if "$cxx" "$work/control-3.cpp" "${flags[@]}" -o "$work/control-3" 2>/dev/null; then
  echo "doc_samples: FAIL: negative control 3 (a missing field initializer under -Werror) compiled" >&2
  exit 1
fi
# 4. A fragment that does nothing must fail the check `paid`; an output check
#    must fail on output that lacks its text; a sum must fail when it is off.
saved_fail=$fail saved_ran=$ran
printf '(void)conn;\n' >"$work/control_04.frag"
if run_fragment "$work/control_04.frag" "fixture=shop check=paid" "negative control 4" 2>/dev/null ||
  ! grep -q "check failed after the fragment ran" "$work/last-run.out"; then
  echo "doc_samples: FAIL: a fragment that does nothing did not fail the check 'paid'" >&2
  exit 1
fi
printf '#include <iostream>\nint main() { std::cout << "sold 1\\n"; }\n' >"$work/control-5.cpp"
compile "$work/control-5.cpp" "negative control 5" || exit 1
if run_built "$work/control-5" 'expect="leading"' "negative control 5" 2>/dev/null; then
  echo "doc_samples: FAIL: an output without its expected text passed" >&2
  exit 1
fi
if run_built "$work/control-5" "processes=3 sum=sold total=2" "negative control 6" 2>/dev/null ||
  ! run_built "$work/control-5" "processes=3 sum=sold total=3" "control 6 (passing)"; then
  echo "doc_samples: FAIL: a sum over processes was not checked" >&2
  exit 1
fi
fail=$saved_fail ran=$saved_ran

# Every block's translation unit first (the same files the loop below
# would write), compiled nproc at a time; then each block is reported and,
# when marked, run, in the documents' order.
docs=("$src/README.md")
for f in "$src"/docs/*.md; do docs+=("$f"); done
blks=() rels=() tus=()
for doc in "${docs[@]}"; do
  rel=${doc#"$src"/}
  tag=$(echo "$rel" | tr '/.' '__')
  split_blocks "$doc" "$tag"
  for blk in "$work/$tag"_*.frag "$work/$tag"_*.main; do
    [[ -e "$blk" ]] || continue
    if [[ "$blk" == *.main ]]; then
      cpp="${blk%.main}-main.cpp"
      cp "$blk" "$cpp"
    elif [[ -e "${blk%.*}.meta" ]]; then
      cpp="${blk%.frag}-run.cpp"
      fragment_tu "$blk" "$work/run-main.inc" >"$cpp"
    else
      cpp="${blk%.frag}-frag.cpp"
      fragment_tu "$blk" "$work/empty-main.inc" >"$cpp"
    fi
    blks+=("$blk") rels+=("$rel") tus+=("$cpp")
  done
done
prebuild "${tus[@]}"
for i in "${!blks[@]}"; do
  blk=${blks[$i]} rel=${rels[$i]} cpp=${tus[$i]}
  n=$(basename "${blk%.*}"); n=${n##*_}
  what="$rel block $n"
  meta_file="${blk%.*}.meta"
  blocks=$((blocks + 1))
  if [[ "$blk" == *.frag && -e "$meta_file" ]]; then
    run_fragment "$blk" "$(cat "$meta_file")" "$what" || true
  elif [[ "$blk" == *.frag ]]; then
    compile "$cpp" "$what" || true
  else
    compile "$cpp" "$what" || continue
    if [[ -e "$meta_file" ]]; then
      run_built "${cpp%.cpp}" "$(cat "$meta_file")" "$what" || fail=1
    fi
  fi
done
echo "doc_samples: $blocks C++ blocks compiled, $ran run, from README.md and docs/*.md" >&2
(( blocks > 0 )) || { echo "doc_samples: FAIL: no C++ block found" >&2; exit 1; }
exit "$fail"
