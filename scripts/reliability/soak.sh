# Part of scripts/reliability.sh (sourced by it, see there): the soak, `soak/mixed`, once per backend.
#
#   --soak-minutes M   soak M minutes per backend, sampled every 10 s after a 60 s warm-up (the run: 10)
#
# Without it: --quick soaks 60 s per backend, the two at the same time, sampled every second after a 10 s warm-up
# (too short for 10 s samples: the thirds compared would hold two samples each); --full soaks 20 minutes per backend
# (40 in all, so that the whole --full run stays near an hour), sampled every 10 s after 60 s. The traffic, the figures and the judgement are the `soak` subcommand's
# (tests/reliability/soak.cpp); docs/reliability.md, "Soak", says why these durations.
part_option soak_minutes soak-minutes ""
if [[ -n $soak_minutes ]]; then
  if ! [[ $soak_minutes =~ ^[0-9]+$ && $soak_minutes -gt 0 ]]; then
    echo "reliability.sh: --soak-minutes takes a positive number of minutes" >&2
    exit 2
  fi
  soak_seconds=$((soak_minutes * 60)); soak_sample_ms=10000; soak_warmup_ms=60000
elif [[ $mode == quick ]]; then
  soak_seconds=60; soak_sample_ms=1000; soak_warmup_ms=10000
else
  soak_seconds=1200; soak_sample_ms=10000; soak_warmup_ms=60000
fi
soak_echo_conns=16; soak_http_conns=8; soak_timers=32
parts+=(soak_part)

soak_part() {
  local backend proc_timeout=$((soak_seconds + 180))  # the soak's own length, plus its end and a margin
  local load="${soak_seconds} s on 2 workers: $soak_echo_conns echo conns, $soak_http_conns HTTP loops, $soak_timers timer loops, posts, 2 channels; a sample every $((soak_sample_ms / 1000)).$((soak_sample_ms % 1000 / 100)) s"
  local verified="every echo, HTTP body, post and channel message checked; injected resets and timeouts seen as injected, no other error; after a $((soak_warmup_ms / 1000)) s warm-up, mean RSS and fds of the last third within 5% of the first, each kind's rate in every sample at least a quarter of its median; clean end"
  # --quick soaks the two backends at the same time, a minute of CI saved: each process used about 1.1 CPUs alone,
  # so together they slow down a little, all the time alike, which the throughput check (each sample against its
  # own run's median) allows for. The longer runs soak one after the other, each with the machine to itself.
  local started=()
  for backend in "${backends[@]}"; do
    [[ " ${backends_available[*]} " == *" $backend "* ]] || continue
    if single_check_start soak/mixed "$backend" "$load" "$verified" -- soak --seconds "$soak_seconds" \
      --sample-ms "$soak_sample_ms" --warmup-ms "$soak_warmup_ms" --echo-conns "$soak_echo_conns" \
      --http-conns "$soak_http_conns" --timers "$soak_timers"; then
      started+=("$backend")
      if [[ $mode != quick || -n $soak_minutes ]]; then single_check_end soak/mixed "$backend" "$load" "$verified"; fi
    fi
  done
  if [[ $mode == quick && -z $soak_minutes ]]; then
    for backend in "${started[@]}"; do single_check_end soak/mixed "$backend" "$load" "$verified"; done
  fi
}
