#!/bin/sh
# Drives `evtctl tail -i` on a Kafka topic in a detached tmux session and checks what the
# screen shows with capture-pane. Run by TestInteractiveKafkaTmux, which starts a
# Kafka-protocol broker holding topic "seeded" of 3 partitions with 300 Open edX events of
# type org.example.tmux.seeded.v1 (subjects seed-1 ... seed-300, in that order) and sets:
#
#   EVTCTL       the evtctl binary (the test binary, with EVTCTL_TEST_AS_MAIN=1)
#   TOPIC        the topic's address, kafka://HOST:PORT/seeded
#   WORK         an empty directory for the tmux socket
#
# It exits 0 when every check passes, and otherwise prints the failed check and the screen.
set -eu
: "${EVTCTL:?}" "${TOPIC:?}" "${WORK:?}"

. "$(dirname "$0")/lib.sh"

t new-session -d -s ui -x 120 -y 40 -c "$WORK" \
	"env EVTCTL_TEST_AS_MAIN=1 '$EVTCTL' tail -i --node '$TOPIC' --keep 100 --page-size 50; echo \"exit=\$?\" > '$WORK/status'; exec sleep 60"

# It opens at the head, live: the newest events the topic holds, and the topic's address.
wait_for "● LIVE"
wait_for "seed-300"
wait_for "kafka://"

# New records appear as they are produced.
"$EVTCTL" emit --to "$TOPIC" --type org.example.tmux.followed.v1 --source /tmux --subject followed-1 --count 2 >/dev/null
wait_for "org.example.tmux.followed.v1"

# Scrolling back past the 100 events held fetches older pages (positions before an event),
# down to the topic's first record.
t send-keys -t ui -N 30 PageUp
wait_for "· no older events on the node ·"
wait_for " seed-1 "
t send-keys -t ui End
wait_for "followed-1"

quit_ok
t kill-server
echo ok
