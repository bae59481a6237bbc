# Part of scripts/reliability.sh (sourced by it, see there): packet reordering, through the veth pair of the
# packet-loss checks.
#   reorder/stream     TCP streams both ways while 1 in 8 packets each way is held back behind the ones after it
#   reorder/exchange   request/response exchanges through the same
#
# How packets are reordered without netem (this kernel has none): each end of the veth pair gets an HTB qdisc with
# two classes, one unshaped (10 Gbit/s) that takes every packet by default, and one shaped to 20 Mbit/s with a burst
# of one packet. A u32 filter sends to the shaped class the packets whose IPv4 identification ends in three zero bits:
# Linux numbers the packets of a connection one after the other, so that is every eighth packet of each connection,
# data and acknowledgements alike. A held packet waits about 0.6 ms per packet queued before it in its class while the
# packets sent after it pass, so the receiver gets segments out of order, which TCP must put back in order
# (TCPOFOQueue in /proc/net/netstat counts each segment it queued out of order: the check requires it to grow in the
# run, so a stage that reordered nothing fails instead of passing for the wrong reason). docs/reliability.md,
# "Packet reordering", has the two details that make it work (gso_max_segs 1, datagrams beside the exchanges).
# What is checked is tern's side: whatever pieces the kernel hands its reads after reassembly, every byte arrives in
# order and every exchange whole.
if [[ $mode == quick ]]; then
  reorder_stream_bytes=$((16 << 20)); reorder_exchanges=2000; reorder_conns=16
else
  reorder_stream_bytes=$((256 << 20)); reorder_exchanges=10000; reorder_conns=32
fi
reorder_on=0

# The HTB classes and the filter on both ends of the veth pair; fails (with reorder_why) when the kernel lacks them.
reorder_set() {
  local ns dev
  for ns in "$ns_server" "$ns_client"; do
    [[ $ns == "$ns_server" ]] && dev=$veth_server || dev=$veth_client
    reorder_on=1
    # HTB warns of its quantum at 10 Gbit/s, which only matters to the sharing between classes: not shown. The shaped
    # class queues at most 32 packets (20 ms at 20 Mbit/s), so the datagrams beside the exchanges cannot bloat it.
    # One segment per packet on the qdisc: TCP builds multi-segment packets whatever the device's offloads (they are
    # cut to wire size after the qdisc), and a request of 16 KiB would be held or passed whole, never reordered.
    ip -n "$ns" link set "$dev" gso_max_segs 1 2>/dev/null &&
      tc -n "$ns" qdisc add dev "$dev" root handle 1: htb default 10 2>/dev/null &&
      tc -n "$ns" class add dev "$dev" parent 1: classid 1:10 htb rate 10gbit 2>/dev/null &&
      tc -n "$ns" class add dev "$dev" parent 1: classid 1:20 htb rate 20mbit ceil 20mbit burst 1600 cburst 1600 \
        2>/dev/null &&
      tc -n "$ns" qdisc add dev "$dev" parent 1:20 handle 20: pfifo limit 32 &&
      tc -n "$ns" filter add dev "$dev" parent 1: protocol ip prio 2 u32 match u16 0 0x0007 at 4 flowid 1:20 ||
      { reorder_why="gso_max_segs, the HTB qdisc or the u32 filter refused (needs sch_htb and cls_u32)"; return 1; }
    if [[ $ns == "$ns_client" ]]; then
      tc -n "$ns" filter add dev "$dev" parent 1: protocol ip prio 1 u32 match ip protocol 17 0xff flowid 1:20 ||
        { reorder_why="tc refused the u32 filter on the IP protocol"; return 1; }
    fi
  done
}
reorder_clear() {
  ((reorder_on)) || return 0
  local ns dev
  for ns in "$ns_server" "$ns_client"; do
    [[ $ns == "$ns_server" ]] && dev=$veth_server || dev=$veth_client
    tc -n "$ns" qdisc del dev "$dev" root 2>/dev/null || true
    ip -n "$ns" link set "$dev" gso_max_segs 65535 2>/dev/null || true
  done
  reorder_on=0
}
cleanup_hooks+=(reorder_clear)

# Datagrams beside the exchanges, from the client's namespace, all sent to the shaped class: it lets a lone packet
# through at once (its bucket is full when nothing queues in it), and exchanges alone keep it nearly empty, so a
# held packet would seldom wait. Bursts of 16 datagrams of 1400 bytes every 10 ms (18 Mbit/s, 90% of the class) keep
# a queue in it on the client's side, and a held packet of a request waits behind them. Datagrams, not a TCP stream:
# they are never queued out of order by a TCP, so the server's TCPOFOQueue counts the requests' segments alone.
reorder_ballast_pid=""
reorder_ballast_start() {
  ip netns exec "$ns_client" timeout -k 5 "$proc_timeout" python3 -c '
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
payload, to = bytes(1400), (sys.argv[1], 9)
while True:
    for _ in range(16):
        try:
            s.sendto(payload, to)
        except OSError:  # the class is full: the qdisc dropped it
            pass
    time.sleep(0.01)
' "$subnet.1" >"$logs/reorder_ballast.log" 2>&1 &
  reorder_ballast_pid=$!
  pids+=("$reorder_ballast_pid")
}
reorder_ballast_stop() {
  [[ -n $reorder_ballast_pid ]] || return 0
  kill "$reorder_ballast_pid" 2>/dev/null || true
  wait "$reorder_ballast_pid" 2>/dev/null || true
  reorder_ballast_pid=""
}

# Segments queued out of order by the receiving TCP in the namespaces given, together.
reorder_ofo() {  # reorder_ofo NS...
  local ns
  for ns in "$@"; do
    ip netns exec "$ns" cat /proc/net/netstat
  done | awk '$1 == "TcpExt:" {
    if ($2 ~ /^[0-9]+$/) { for (i = 2; i <= NF; i++) if (name[i] == "TCPOFOQueue") n += $i }
    else { for (i = 2; i <= NF; i++) name[i] = $i }
  } END { print n + 0 }'
}
# Packets the shaped class sent and dropped (its queue full), both ends together: "SENT DROPPED".
reorder_held() {
  local ns dev
  for ns in "$ns_server" "$ns_client"; do
    [[ $ns == "$ns_server" ]] && dev=$veth_server || dev=$veth_client
    tc -n "$ns" -s class show dev "$dev" classid 1:20
  done | awk '$1 == "Sent" { n += $4; d += $7 } END { print n + 0, d + 0 }'
}

reorder_part() {
  local backend sload eload ofo0 held0 dropped0 ofo held dropped n ofo_ns
  local sverified="every byte both ways checked against its stream; end of stream; segments reached TCP out of order"
  local everified="every exchange answered and checked; segments reached TCP out of order"
  sload="$(human_bytes "$reorder_stream_bytes") each way, 1 in 8 packets held back"
  eload="$reorder_exchanges exchanges on $reorder_conns conns, 1 in 8 packets held back behind datagrams"
  selected reorder/stream || selected reorder/exchange || return 0
  local why=""
  if ((!netns_ok)); then
    why="skipped: needs root and netns ($netns_why)"
  elif ! command -v tc >/dev/null; then
    why="skipped: no tc (iproute2)"
  elif ! reorder_set; then
    reorder_clear
    why="skipped: $reorder_why"
  fi
  for backend in "${backends[@]}"; do
    [[ " ${backends_available[*]} " == *" $backend "* ]] || continue
    if [[ -n $why ]]; then
      selected reorder/stream && record reorder/stream "$backend" "$sload" "$(now)" "$why" "-"
      selected reorder/exchange && record reorder/exchange "$backend" "$eload" "$(now)" "$why" "-"
      continue
    fi
    for n in stream exchange; do
      selected "reorder/$n" || continue
      # The stream's segments are reordered both ways; the exchanges are measured on the requests, which wait
      # behind the datagrams on the client's side (the server's TCP receives them).
      if [[ $n == stream ]]; then ofo_ns=("$ns_server" "$ns_client"); else ofo_ns=("$ns_server"); fi
      ofo0=$(reorder_ofo "${ofo_ns[@]}")
      read -r held0 dropped0 <<<"$(reorder_held)"
      if [[ $n == stream ]]; then
        run_pair reorder/stream "$backend" "$sload" "$sverified" \
          "ip netns exec $ns_server" "ip netns exec $ns_client" "$subnet.1" \
          stream-server --conns 2 -- stream-client --conns 2 --bytes "$reorder_stream_bytes"
      else
        reorder_ballast_start
        run_pair reorder/exchange "$backend" "$eload" "$everified" \
          "ip netns exec $ns_server" "ip netns exec $ns_client" "$subnet.1" \
          exchange-server --conns "$reorder_conns" -- exchange-client --conns "$reorder_conns" \
          --count "$reorder_exchanges" --max-len 16384 --deadline-every 100
        reorder_ballast_stop
      fi
      ofo=$(($(reorder_ofo "${ofo_ns[@]}") - ofo0))
      read -r held dropped <<<"$(reorder_held)"
      held=$((held - held0))
      dropped=$((dropped - dropped0))
      figure "reorder/$n" "$backend" "$held packets through the shaped class$([[ $n == exchange ]] &&
        echo " (the datagrams beside included)"), $dropped dropped when its queue was full; $ofo segments queued out of order by the receiving TCP$([[ $n == exchange ]] && echo " (the server's: the requests)")"
      # tern passed, but nothing was reordered: the stage failed, and a row says so (the run fails with it).
      if ((ofo == 0)); then
        record "reorder/stage" "$backend" "during reorder/$n" "$(now)" \
          "FAILED: no segment arrived out of order ($held packets held back): the stage did not reorder" "-"
      fi
    done
  done
  reorder_clear
}
parts+=(reorder_part)
