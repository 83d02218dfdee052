# The loopback ports the throwaway servers listen on: shared by
# tools/dbservers.sh and tools/topologies.sh, which source it (and define
# log(), die() and now_us()).

# Sockets that are not listening but have $1 as their LOCAL port: a client
# connection that drew it from the kernel's ephemeral range (which holds the
# default ports here), or what is left of one after it closed (TIME_WAIT,
# 60 s). The server's bind fails with "Address already in use" while any is
# there, so the start waits for them to go (up to 70 s), saying why.
port_local_users() { ss -Htan "sport = :$1" 2>/dev/null | grep -v '^LISTEN' || true; }
wait_port_unbound() { # port envvar what
  local port=$1 var=$2 what=$3 users deadline
  users=$(port_local_users "$port")
  [[ -z "$users" ]] && return 0
  log "$what: TCP port $port is the local port of $(wc -l <<<"$users") client socket(s)" \
      "($(awk '{print $1}' <<<"$users" | sort | uniq -c | xargs)): the kernel's ephemeral port range" \
      "($(xargs </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo '?')) holds it; waiting up to 70 s for them to close"
  deadline=$(( $(now_us) + 70000000 ))
  while [[ -n "$users" ]] && (( $(now_us) < deadline )); do
    sleep 0.5
    users=$(port_local_users "$port")
  done
  [[ -z "$users" ]] && return 0
  die "$what: TCP port $port is still the local port of a client connection after 70 s" \
      "($(head -n 1 <<<"$users" | xargs)). Set $var to a port outside the ephemeral range" \
      "or close that connection."
}
