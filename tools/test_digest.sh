#!/usr/bin/env bash
# Prints a short digest of the failures in ctest logs written by tools/test.sh:
# each failed Catch2 assertion (its test case, section, file:line, expression,
# expansion and messages) and each ctest entry that failed, so the end of a
# long CI log says what failed even when its middle is cut off.
#
# Usage: tools/test_digest.sh LOG...     (prints nothing when nothing failed)
set -euo pipefail

max_lines=${SQLGUARD_DIGEST_LINES:-80}
out=$(
  for log in "$@"; do
    [[ -s "$log" ]] || continue
    awk -v src="$(basename "$log")" '
      # Catch2 v2 console: a test case header is a dashed line, the names
      # (case, then sections, indented), a dashed line, then the location and
      # a dotted line. A failure is "file:line: FAILED:" followed by indented
      # lines (the expression, "with expansion:", "with message:") up to a
      # blank line that is followed by an unindented one.
      /^-{79}$/ { if (inhdr) { inhdr = 0 } else { inhdr = 1; hdr = "" } ; infail = 0; next }
      inhdr { hdr = hdr (hdr == "" ? "" : " ") $0; gsub(/  +/, " ", hdr); gsub(/- /, "", hdr); next }
      /^\.{79}$/ || /^={79}$/ { infail = 0; next }
      /: FAILED:$/ || /: FAILED:/ {
        if (hdr != shown) { print "[" src "] " hdr; shown = hdr }
        print "  " $0; infail = 1; n = 0; next
      }
      infail {
        if ($0 == "") { blank = 1; next }
        if ($0 !~ /^(  |with |due to |explicitly )/) { infail = 0; next }
        if (++n <= 12) print "    " $0
        next
      }
      /^ *[0-9]+\/[0-9]+ Test +#[0-9]+: .*\*\*\*(Failed|Timeout|Exception)/ { print "[" src "] ctest: " $0 }
    ' "$log"
  done
)
[[ -n "$out" ]] || exit 0
total=$(printf '%s\n' "$out" | wc -l)
printf '\n==> failure digest (%d lines; the full output is above)\n' "$total"
printf '%s\n' "$out" | head -n "$max_lines"
(( total <= max_lines )) || printf '... %d more lines\n' "$((total - max_lines))"
