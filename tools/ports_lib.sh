# The loopback ports the throwaway servers listen on: shared by
# tools/dbservers.sh and tools/topologies.sh, which source it (and define
# log(), die() and now_us()).

# Whether a server could bind 127.0.0.1:$1 now the way PostgreSQL, MariaDB,
# PgBouncer and etcd do (SO_REUSEADDR). A client socket that drew the port
# from the kernel's ephemeral range (which holds the default ports here), or
# its TIME_WAIT after it closed (60 s), makes that bind fail with "Address
# already in use"; what is left of a stopped server's own connections (its
# side of them, in TIME_WAIT or FIN-WAIT) does not.
port_bindable() {
  python3 -c 'import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(1)' "$1"
}
# Waits (up to 70 s, saying why) until port_bindable; dies naming the port's
# sockets after that.
wait_port_unbound() { # port envvar what
  local port=$1 var=$2 what=$3 deadline
  port_bindable "$port" && return 0
  log "$what: TCP port $port cannot be bound yet: a client socket has it as its local port" \
      "($(ss -Htan "sport = :$port" 2>/dev/null | awk '{print $1}' | sort | uniq -c | xargs)); the kernel's ephemeral" \
      "port range ($(xargs </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo '?')) holds it; waiting up to 70 s"
  deadline=$(( $(now_us) + 70000000 ))
  while ! port_bindable "$port"; do
    (( $(now_us) < deadline )) || die "$what: TCP port $port still cannot be bound after 70 s" \
        "($(ss -Htan "sport = :$port" 2>/dev/null | head -n 1 | xargs)). Set $var to a port outside the ephemeral" \
        "range or close that connection."
    sleep 0.5
  done
}
