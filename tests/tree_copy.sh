# Sourced by the tests that prove an extension is small (fourth_dialect/,
# new_kind/): copy this tree, add the extension, check the copy differs by
# exactly that, and build it. The caller defines say() and fail().

# tree_copy SRC WORK: WORK/src becomes a copy of SRC's files (tracked, and
# untracked ones git does not ignore); sets `list` to a file of their names
# (NUL-separated), removed on exit.
tree_copy() {
  local src=$1 work=$2
  rm -rf "$work/src"
  mkdir -p "$work/src"
  list=$(mktemp)
  trap 'rm -f "$list"' EXIT
  (cd "$src" && git ls-files -z --cached --others --exclude-standard) >"$list" \
    || fail "git ls-files failed in $src (the test copies the tracked tree)"
  (cd "$src" && xargs -0 tar --ignore-failed-read -cf - <"$list") | tar -xf - -C "$work/src"
}

# tree_differs_only SRC WORK FILE NEW_PATH_REGEX...: every file of SRC is
# byte-identical in the copy but FILE, which gained exactly one line, and the
# copy's only new files match one of the extended regexes.
tree_differs_only() {
  local src=$1 work=$2 file=$3
  shift 3
  local changed added extra pattern
  changed=$(cd "$src" && xargs -0 -I{} sh -c 'test ! -f "$1" || cmp -s "$1" "$2/$1" || echo "$1"' _ {} "$work/src" <"$list")
  [[ "$changed" == "$file" ]] || fail "files changed besides $file: $changed"
  added=$(diff "$src/$file" "$work/src/$file" | grep -c '^>' || true)
  [[ "$added" == 1 ]] || fail "$file: $added lines added, not one"
  extra=$(cd "$work/src" && find . -type f | sed 's|^\./||' | sort | comm -23 - <(tr '\0' '\n' <"$list" | sort))
  for pattern in "$@"; do extra=$(grep -v -E -e "$pattern" <<<"$extra" || true); done
  [[ -z "$extra" ]] || fail "new files besides the extension's: $extra"
}

# tree_build SRC WORK BUILD_TYPE TARGET... [-- CMAKE_ARG...]: configures the
# copy without tools and examples and builds the targets (ccache, when the
# main build used it, makes this mostly cache hits).
tree_build() {
  local src=$1 work=$2 build_type=$3
  shift 3
  local targets=() args=()
  while (( $# )) && [[ $1 != -- ]]; do targets+=(--target "$1"); shift; done
  (( $# )) && shift && args=("$@")
  local launcher=()
  if command -v ccache >/dev/null; then
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
    export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$src} CCACHE_NOHASHDIR=1
  fi
  cmake -S "$work/src" -B "$work/src/build" -DCMAKE_BUILD_TYPE="$build_type" -DSQLGUARD_BUILD_TOOLS=OFF \
    -DSQLGUARD_BUILD_EXAMPLES=OFF "${launcher[@]}" "${args[@]}" >/dev/null
  cmake --build "$work/src/build" -j"$(nproc)" "${targets[@]}" >/dev/null
}
