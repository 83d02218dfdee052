# A database server process under libfaketime (Debian package faketime), its
# wall clock read from an offset file: shared by tools/dbservers.sh and
# tools/topologies.sh, which source it (and define die()).

# Sets FAKETIME_ENV: the command prefix that starts a process under
# libfaketime reading RC at every clock reading (FAKETIME_NO_CACHE), its
# monotonic clock left real. RC is set to "+0" (the real time) when FRESH is
# 1 or RC is missing; otherwise it keeps its offset.
faketime_env() { # rc fresh
  local lib=${SQLGUARD_FAKETIME_LIB:-} f
  if [[ -z "$lib" ]]; then
    for f in /usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1 /usr/lib/*/faketime/libfaketimeMT.so.1; do
      [[ -r "$f" ]] && { lib=$f; break; }
    done
  fi
  [[ -n "$lib" && -r "$lib" ]] || die "libfaketime not found (SQLGUARD_SERVER_CLOCK=faketime); run tools/deps.sh (Debian package faketime) or set SQLGUARD_FAKETIME_LIB"
  [[ "$2" == 0 && -f "$1" ]] || echo "+0" >"$1"
  chmod 0644 "$1"
  FAKETIME_ENV=(env LD_PRELOAD="$lib" FAKETIME_TIMESTAMP_FILE="$1" FAKETIME_NO_CACHE=1
                FAKETIME_DONT_FAKE_MONOTONIC=1)
}

# Writes OFFSET from the real time (+30s, -30s, +1h, -1h, 0; libfaketime's
# relative form) to RC, atomically: a reader never sees it half written.
# Sets FAKETIME_OFFSET to what was written.
faketime_step() { # rc offset
  local off=$2
  [[ "$off" =~ ^[+-]?[0-9]+[smhd]?$ ]] || die "clock: bad offset '$off' (use +30s, -30s, +1h, -1h, 0)"
  [[ "$off" == [+-]* ]] || off=+$off
  printf '%s\n' "$off" >"$1.tmp"
  chmod 0644 "$1.tmp"
  mv -f "$1.tmp" "$1"
  FAKETIME_OFFSET=$off
}
