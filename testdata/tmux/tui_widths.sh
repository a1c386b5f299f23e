#!/bin/sh
# Opens the terminal UI, tail -i and replay -i, at 80 and 120 columns in a detached tmux
# session, and saves what each screen shows for TestInteractiveWidthsTmux to check. Run by
# that test, which starts a node holding OEP-41 events (types such as
# org.openedx.learning.course.enrollment.created.v1) and sets:
#
#   EVTCTL       the evtctl binary (the test binary, with EVTCTL_TEST_AS_MAIN=1)
#   EVTCTL_NODE  the node's URL
#   WORK         an empty directory for the tmux socket and the screens
#
# Each screen is saved as $WORK/screens/NAME-WIDTH.txt, 30 lines, wrapped lines joined
# (so that a line that wrapped shows as one too long) and trailing spaces kept:
#
#   tail         tail -i, following the head
#   tail-paused  the same, paused (the longest status bar)
#   tail-query   the same, with a long filter query applied
#   help         the help screen (?)
#   replay       replay -i, at the range's start
set -eu
: "${EVTCTL:?}" "${EVTCTL_NODE:?}" "${WORK:?}"

TMUX_UTF8=1
CAPTURE_JOIN=1
. "$(dirname "$0")/lib.sh"
# open WIDTH ARGS...: runs evtctl ARGS in a new session WIDTH columns wide, 30 lines high.
open() {
	width=$1
	shift
	t new-session -d -s ui -x "$width" -y 30 -c "$WORK" \
		"env EVTCTL_TEST_AS_MAIN=1 EVTCTL_NODE='$EVTCTL_NODE' '$EVTCTL' $*; exec sleep 60"
}
# save NAME: saves the screen once it has stopped changing.
save() {
	prev=""
	cur=$(screen)
	while [ "$cur" != "$prev" ]; do
		sleep 0.2
		prev=$cur
		cur=$(screen)
	done
	screen >"$WORK/screens/$1-$width.txt"
}

mkdir -p "$WORK/screens"
# A session that outlives the others keeps the server up between them: a server that has
# just lost its last session may still be on its way out when the next one starts.
t new-session -d -s keep "exec sleep 600"
for width in 80 120; do
	open "$width" tail -i
	wait_for "● LIVE"
	wait_for "enrollment.created.v1"
	save tail

	t send-keys -t ui Space
	wait_for "PAUSED"
	save tail-paused
	t send-keys -t ui Space

	t send-keys -t ui /
	wait_for "filter ›"
	t send-keys -t ui C-u
	t send-keys -t ui -l "type = 'org.openedx.learning.course.enrollment.created.v1' AND data.mode = 'verified'"
	t send-keys -t ui Enter
	wait_for "filter applied"
	save tail-query

	t send-keys -t ui '?'
	wait_for "quit, restoring the terminal"
	save help
	t kill-session -t ui

	open "$width" replay -i
	wait_for "● REPLAY"
	wait_for "course.created.v1"
	save replay
	t kill-session -t ui
done
t kill-server
echo ok
