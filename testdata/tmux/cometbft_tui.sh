#!/bin/sh
# Opens the terminal UI, tail -i, on a CometBFT chain in a detached tmux session 80 columns
# wide and 24 lines high, waits until it shows the chain's block events and transactions,
# and saves the screen as $WORK/screen.txt for TestCometBFTScripts to check; then q ends it,
# with status 0, and what the terminal shows after is saved as $WORK/after.txt. Run by that
# test, which sets:
#
#   EVTCTL       the evtctl binary (the test binary, with EVTCTL_TEST_AS_MAIN=1)
#   EVTCTL_NODE  the chain's node (a plain http:// address: evtctl finds out what it is)
#   WORK         an empty directory for the tmux socket and the screen
set -eu
: "${EVTCTL:?}" "${EVTCTL_NODE:?}" "${WORK:?}"

TMUX_UTF8=1
CAPTURE_JOIN=1
. "$(dirname "$0")/lib.sh"

t new-session -d -s ui -x 80 -y 24 -c "$WORK" \
	"env EVTCTL_TEST_AS_MAIN=1 EVTCTL_NODE='$EVTCTL_NODE' '$EVTCTL' tail -i; echo \"exit=\$?\" > '$WORK/status'; exec sleep 60"
wait_for "● LIVE"
wait_for " NewBlockEvents "
wait_for " Tx "
# The list follows the chain: the selected row, the newest, moves on to each new height.
selected() { screen | grep -o '▶ [0-9:.]*' | head -n 1; }
before=$(selected)
[ -n "$before" ] || fail "no row is selected"
i=0
until [ "$(selected)" != "$before" ]; do
	i=$((i + 1))
	[ "$i" -lt 400 ] || fail "the list stayed at $before"
	sleep 0.05
done
# The list follows the head, where empty blocks or another test's burst of transactions can
# fill the screen for a moment (the test sends a transaction every 300 ms meanwhile): the
# screen is kept once it shows both kinds of item (the test checks it, and reports what it
# showed if that never came).
i=0
while :; do
	screen >"$WORK/screen.txt"
	if grep -qF " NewBlockEvents " "$WORK/screen.txt" && grep -qF " Tx " "$WORK/screen.txt"; then
		break
	fi
	i=$((i + 1))
	[ "$i" -lt 400 ] || break
	sleep 0.05
done

quit_ok
# What the terminal shows once the UI has given it back.
screen >"$WORK/after.txt"
t kill-server
echo ok
