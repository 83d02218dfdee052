#!/usr/bin/env bash
# The Debian packages (docs/install.md, cmake/sqlguard_cpack.cmake): runs
# `cpack -G DEB` on a configured and built tree, then does what CMake 3.25's
# CPackDeb does not do as Debian's own tools (debhelper) do:
#   - CPack writes a postinst and postrm that call ldconfig into every package
#     with a shared object under /usr/lib. The library packages register
#     theirs by the ldconfig trigger instead (cmake/debian/triggers, as
#     dh_makeshlibs does), and the comparators module is not on the linker's
#     path at all: those scripts are dropped (lintian:
#     maintscript-calls-ldconfig).
#   - The -dbgsym .ddebs' md5sums list the build machine's absolute paths
#     (lintian: md5sums-lists-nonexistent-file): written again, relative.
#     Their /usr/share/doc/<package>-dbgsym becomes a link to <package>'s
#     (copyright and changelog), as dh_strip makes it.
# A package is rewritten only when one of these applies.
#
# Usage: tools/packages.sh BUILD_DIR OUT_DIR   (OUT_DIR is emptied first)
set -euo pipefail
say() { printf 'packages: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

(( $# == 2 )) || die "usage: tools/packages.sh BUILD_DIR OUT_DIR"
build=$1 out=$2
[[ -f "$build/CPackConfig.cmake" ]] || die "$build has no CPackConfig.cmake (configure and build it first)"
for tool in cpack dpkg-deb md5sum; do
  command -v "$tool" >/dev/null || die "$tool not found (Debian: cmake, dpkg, coreutils)"
done

rm -rf "$out"
mkdir -p "$out"
log=$out/cpack.log
say "cpack -G DEB ($log)"
cpack -G DEB --config "$build/CPackConfig.cmake" -B "$out" >"$log" 2>&1 || { cat "$log" >&2; die "cpack failed"; }
rm -rf "$out/_CPack_Packages"

# Whether a maintainer script is CPack's ldconfig call and nothing else: no
# line outside that pattern (grep -v exits 1 when every line matched; 2 is
# an error, which is "no").
only_ldconfig() {
  [[ -f "$1" ]] || return 1
  local rc=0
  grep -q -v -E '^[[:space:]]*(#.*|set -e|if \[ "\$1" = "(configure|remove)" \]; then|ldconfig|fi|)[[:space:]]*$' "$1" || rc=$?
  (( rc == 1 ))
}

work=$(mktemp -d "${TMPDIR:-/tmp}/sqlguard-packages.XXXXXX")
trap 'rm -rf "$work"' EXIT
shopt -s nullglob
made=("$out"/*.deb "$out"/*.ddeb)
(( ${#made[@]} )) || die "cpack made no package (see $log)"
for f in "${made[@]}"; do
  rm -rf "$work/p"
  dpkg-deb -R "$f" "$work/p"
  changed=()
  for script in postinst postrm; do
    if only_ldconfig "$work/p/DEBIAN/$script"; then
      rm -f "$work/p/DEBIAN/$script"
      changed+=("dropped CPack's ldconfig $script")
    fi
  done
  if [[ "$f" == *.ddeb ]]; then
    pkg=$(dpkg-deb -f "$f" Package)
    mkdir -p "$work/p/usr/share/doc"
    ln -s "${pkg%-dbgsym}" "$work/p/usr/share/doc/$pkg"
    (cd "$work/p" && find usr -type f -print0 | LC_ALL=C sort -z | xargs -0 -r md5sum) >"$work/p/DEBIAN/md5sums"
    changed+=("relative md5sums, doc link to ${pkg%-dbgsym}")
  fi
  if (( ${#changed[@]} )); then
    dpkg-deb --root-owner-group -b "$work/p" "$f" >/dev/null
    say "$(basename "$f"): $(IFS=';'; echo "${changed[*]}")"
  fi
done
printf '%s\n' "${made[@]}"
