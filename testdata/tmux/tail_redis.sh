#!/bin/sh
# Drives `evtctl tail -i` on a Redis stream in a detached tmux session and checks what the
# screen shows. Run by TestInteractiveRedisTmux, which starts a redis-server whose stream
# "orders" holds 250 entries written as the Open edX event bus writes them (ids seed-1 ...
# seed-250), and sets:
#
#   EVTCTL       the evtctl binary (the test binary, with EVTCTL_TEST_AS_MAIN=1)
#   STREAM       the stream's address, redis://127.0.0.1:PORT/0/orders
#   WORK         an empty directory for the tmux socket
#
# It exits 0 when every check passes, and otherwise prints the failed check and the screen.
set -eu
: "${EVTCTL:?}" "${STREAM:?}" "${WORK:?}"

. "$(dirname "$0")/lib.sh"
# add ID: add one entry to the stream, as the Open edX event bus would.
add() {
	"$EVTCTL" emit --to "$STREAM" --type org.openedx.learning.course.enrollment.changed.v1 \
		--source openedx/lms/web --id "$1" --data '{"n":1}' -o json >/dev/null
}

t new-session -d -s ui -x 160 -y 40 -c "$WORK" \
	"env EVTCTL_TEST_AS_MAIN=1 '$EVTCTL' tail -i --node '$STREAM' --keep 100 --page-size 20; echo \"exit=\$?\" > '$WORK/status'; exec sleep 60"

# It opens at the head, live, with the stream's newest entries, and follows new ones.
wait_for "● LIVE"
wait_for "seed-250"
wait_for "org.openedx.learning.course.enrollment.created.v1"
add live-1
wait_for "live-1"
wait_for "org.openedx.learning.course.enrollment.changed.v1"

# Scrolling back past the 100 held fetches older pages (XREVRANGE), down to the oldest.
t send-keys -t ui -N 80 PageUp
wait_for "· no older events on the node ·"
wait_for '"id": "seed-1",'

quit_ok
t kill-server
echo ok
