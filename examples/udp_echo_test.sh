#!/bin/sh
# Usage: udp_echo_test.sh UDP_ECHO
# Starts the server on a free loopback port, then clients with small, large and empty-ish datagrams, and checks
# that the server stops on SIGTERM.
set -eu
prog=$1
. "$(dirname "$0")/start_server.sh"
start_server "$prog" server 127.0.0.1:0

"$prog" client "$endpoint" 2000 64
"$prog" client "$endpoint" 200 60000
"$prog" client "$endpoint" 100 1
kill -TERM "$server_pid"
wait "$server_pid"
server_pid=
echo "udp_echo: every echo verified; the server stopped on SIGTERM"
