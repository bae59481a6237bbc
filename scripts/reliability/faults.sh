# The faults of the system's limits (sourced by scripts/reliability.sh; docs/reliability.md, "Faults: the system's
# limits", says what each check verifies and why):
#   fault/enfile         the system-wide file table full under examples/echo_server (fs.file-max lowered for ~3 s)
#   fault/ring-dry       the receive pool running dry under many streams into receive()
#   fault/full-disk      file writes to a small tmpfs until ENOSPC, read back, then written again after freeing
#   fault/close-pending  sockets and acceptors closed by another task under pending operations
# Everything this file changes on the machine (fs.file-max, the tmpfs mount) is undone right after its check and
# again by faults_cleanup on every exit of the script.

if [[ $mode == quick ]]; then
  faults_enfile_conns=200; faults_ring_conns=64; faults_ring_bytes=$((1 << 20)); faults_disk_mib=32
  faults_close_count=100
else
  faults_enfile_conns=1000; faults_ring_conns=256; faults_ring_bytes=$((16 << 20)); faults_disk_mib=256
  faults_close_count=1000
fi

faults_file_max_saved=""  # fs.file-max before fault/enfile lowered it; empty once restored
faults_mount=""           # the tmpfs of fault/full-disk while it is mounted

faults_restore_file_max() {
  [[ -n $faults_file_max_saved ]] || return 0
  if [[ $(cat /proc/sys/fs/file-max) != "$faults_file_max_saved" ]]; then
    echo "$faults_file_max_saved" >/proc/sys/fs/file-max
  fi
  faults_file_max_saved=""
}
faults_unmount() {
  [[ -n $faults_mount ]] || return 0
  umount "$faults_mount" 2>/dev/null || umount -l "$faults_mount" 2>/dev/null || true
  rmdir "$faults_mount" 2>/dev/null || true
  faults_mount=""
}
faults_cleanup() {
  faults_restore_file_max
  faults_unmount
}
cleanup_hooks+=(faults_cleanup)

# The server holds CAP_SYS_ADMIN? (bit 21 of CapEff: such a process is exempt from fs.file-max)
faults_has_sys_admin() {
  local hex
  hex=$(awk '/^CapEff:/ { print $2 }' "/proc/$1/status" 2>/dev/null) || return 0
  [[ -n $hex ]] || return 0
  (((16#$hex >> 21) & 1))
}

faults_enfile_check() {
  local backend=$1 log="$logs/enfile.$backend.server.log" clog="$logs/enfile.$backend.client.log" start
  local conns=$faults_enfile_conns status=0 r why="" fd0
  local proc_timeout=60  # the client's whole run, fs.file-max lowered for 2-3 s of it: never left low for long
  local load="echo_server without CAP_SYS_ADMIN, fs.file-max below the use, $conns conns"
  local verified="accept fails with ENFILE; old connections served, server CPU low meanwhile; all $conns served after"
  # While the file TERN_RELIABILITY_FILE_MAX_WAIT names exists, processes that the lowered fs.file-max would break
  # run beside the suite (scripts/test.sh: the last preset's tests; the PostgreSQL servers run as the postgres user,
  # and a Unix socket cannot be made by anyone, root included, while the system has more than twice fs.file-max of
  # them): the check waits for them (at most 10 minutes). It runs at the suite's end (faults_enfile_part, in
  # parts_last), by when they are usually done.
  local waited=0
  while [[ -n ${TERN_RELIABILITY_FILE_MAX_WAIT:-} && -e $TERN_RELIABILITY_FILE_MAX_WAIT ]] && ((waited < 600)); do
    if ((waited == 0)); then echo "reliability.sh: fault/enfile waits until $TERN_RELIABILITY_FILE_MAX_WAIT is gone"; fi
    sleep 1
    waited=$((waited + 1))
  done
  start=$(now)
  if [[ $(id -u) != 0 ]]; then
    record fault/enfile "$backend" "$load" "$start" "skipped: needs root (fs.file-max)" "$verified"
    return 0
  fi
  if ! command -v setpriv >/dev/null; then
    record fault/enfile "$backend" "$load" "$start" "skipped: no setpriv (util-linux) to drop CAP_SYS_ADMIN" "$verified"
    return 0
  fi
  # Processes with CAP_SYS_ADMIN are exempt from fs.file-max: the server runs without it (from the bounding and
  # inheritable sets, so that exec does not give it back to root).
  if ! start_echo_server "$backend" "$log" setpriv --inh-caps=-sys_admin --bounding-set=-sys_admin; then
    record fault/enfile "$backend" "$load" "$start" "FAILED: echo_server did not start: $(tail -n 1 "$log")" "$verified"
    return 0
  fi
  if faults_has_sys_admin "$echo_prog"; then
    stop_echo_server
    record fault/enfile "$backend" "$load" "$start" "skipped: setpriv could not drop the server's CAP_SYS_ADMIN" \
      "$verified"
    return 0
  fi
  sleep 0.2
  fd0=$(fd_count "$echo_prog")
  faults_file_max_saved=$(cat /proc/sys/fs/file-max)
  # The tool lowers fs.file-max for its window (about 2 s) and restores it itself; this restores it again whatever
  # became of the tool.
  TERN_BACKEND=$backend timeout -k 5 "$proc_timeout" "$tool" enfile-client --connect "$echo_ep" --pid "$echo_prog" \
    --conns "$conns" --before 16 --window-ms 1500 >"$clog" 2>&1 || status=$?
  faults_restore_file_max
  echo_limit_verdict fault/enfile "$backend" "$load" "$start" "$verified" "$clog" "$status" "$log" "$fd0" ENFILE \
    'Too many open files in system'
}

faults_full_disk_check() {
  local backend=$1 start
  local load="tmpfs of $faults_disk_mib MiB, 4 files written at once"
  local verified="ENOSPC as no_space_on_device with the bytes written; all read back; writes succeed after freeing"
  start=$(now)
  if [[ $(id -u) != 0 ]]; then
    record fault/full-disk "$backend" "$load" "$start" "skipped: needs root (mount)" "$verified"
    return 0
  fi
  faults_mount=$(mktemp -d /tmp/tern-rel-full.XXXXXX)
  local mlog="$logs/full-disk.$backend.mount.log"
  if ! mount -t tmpfs -o "size=${faults_disk_mib}m,mode=0700" tern-rel-full "$faults_mount" 2>"$mlog"; then
    rmdir "$faults_mount"
    faults_mount=""
    record fault/full-disk "$backend" "$load" "$start" "skipped: mount -t tmpfs refused: $(head -n 1 "$mlog")" \
      "$verified"
    return 0
  fi
  single_check fault/full-disk "$backend" "$load" "$verified" -- \
    full-disk --dir "$faults_mount" --files 4 --cap-mib $((faults_disk_mib * 2))
  faults_unmount
}

faults_part() {
  local backend
  for backend in "${backends[@]}"; do
    [[ " ${backends_available[*]} " == *" $backend "* ]] || continue
    single_check fault/ring-dry "$backend" \
      "$faults_ring_conns streams of $(human_bytes "$faults_ring_bytes"), pool of 4-16 x 4 KiB" \
      "every byte checked; the pool runs dry, grows to its maximum, overflows to the heap; every buffer back after" \
      -- ring-dry --conns "$faults_ring_conns" --bytes "$faults_ring_bytes"
    if selected fault/full-disk; then faults_full_disk_check "$backend"; fi
    single_check fault/close-pending "$backend" \
      "$faults_close_count each of 7 pending operation kinds, closed at once" \
      "each completes once with operation_canceled (with the bytes moved); fds freed; a good client served throughout" \
      -- close-pending --count "$faults_close_count"
  done
}
parts+=(faults_part)

# fault/enfile last of all the checks: the lowered fs.file-max refuses files and Unix sockets to every process
# without CAP_SYS_ADMIN, and Unix sockets to all, for its window, so it waits for what runs beside the suite
# (TERN_RELIABILITY_FILE_MAX_WAIT), which is then usually over.
faults_enfile_part() {
  local backend
  for backend in "${backends[@]}"; do
    [[ " ${backends_available[*]} " == *" $backend "* ]] || continue
    if selected fault/enfile; then faults_enfile_check "$backend"; fi
  done
}
parts_last+=(faults_enfile_part)
