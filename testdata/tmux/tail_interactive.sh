#!/bin/sh
# Drives `evtctl tail -i` in a detached tmux session, as a user at a terminal would, and
# checks what the screen shows with capture-pane. Run by TestInteractiveTmux, which starts
# a node holding 300 events of type org.example.tmux.seeded.v1 (subjects seed-1 ...
# seed-300) and sets:
#
#   EVTCTL       the evtctl binary (the test binary, with EVTCTL_TEST_AS_MAIN=1)
#   EVTCTL_NODE  the node's URL
#   WORK         an empty directory for the tmux socket and the files the UI writes
#
# It exits 0 when every check passes, and otherwise prints the failed check and the screen.
set -eu
: "${EVTCTL:?}" "${EVTCTL_NODE:?}" "${WORK:?}"

. "$(dirname "$0")/lib.sh"
# emit TYPE N: send N events in one request; prints the cursor of the last one.
emit() {
	"$EVTCTL" emit --type "$1" --source /tmux --count "$2" --mode batch --data '{"n":{{.Seq}}}' -o json |
		tail -n 1 | sed 's/.*"cursor":"\([^"]*\)".*/\1/'
}

# After evtctl exits, the pane stays open (sleep) so that its terminal's state can be read.
t new-session -d -s ui -x 120 -y 40 -c "$WORK" \
	"env EVTCTL_TEST_AS_MAIN=1 EVTCTL_NODE='$EVTCTL_NODE' '$EVTCTL' tail -i --keep 100 --page-size 50; echo \"exit=\$?\" > '$WORK/status'; exec sleep 60"
t set-option -g set-clipboard on

# It opens at the head, live, and follows new events.
wait_for "● LIVE"
wait_for "seed-300"
last=$(emit org.example.tmux.followed.v1 2)
wait_for "newest $last"
wait_for "org.example.tmux.followed.v1"

# Space pauses: new events are counted, not shown; space again shows them.
t send-keys -t ui Space
wait_for "PAUSED · 0 new events"
last=$(emit org.example.tmux.late.v1 3)
wait_for "newest $last"
wait_for "PAUSED · 3 new events"
screen | grep -qF "org.example.tmux.late.v1" && fail "a paused list showed new events"
t send-keys -t ui Space
wait_gone "PAUSED"
wait_for "org.example.tmux.late.v1"

# Scrolling back past the 100 events held fetches older pages, down to the oldest.
t send-keys -t ui -N 30 PageUp
wait_for "· no older events on the node ·"
wait_for " seed-1 "
t send-keys -t ui End
wait_for "org.example.tmux.late.v1"

# ? lists the keys; any key closes the list. A key sent right after Escape would be read
# with it as one alt+key (as terminals send those), so wait for the list to close.
t send-keys -t ui '?'
wait_for "copy the selected event's cursor to the clipboard"
t send-keys -t ui Escape
wait_gone "copy the selected event's cursor to the clipboard"
wait_for "● LIVE"

# A filter with a syntax error is shown inline and changes nothing; a good one applies.
t send-keys -t ui / C-u
t send-keys -t ui -l 'data.n >'
t send-keys -t ui Enter
wait_for "offset 8: "
wait_for "all events"
t send-keys -t ui C-u
t send-keys -t ui -l "type = 'org.example.tmux.followed.v1'"
t send-keys -t ui Enter
wait_for "query: type = 'org.example.tmux.followed.v1'"
wait_gone "org.example.tmux.late.v1"

# c copies with OSC 52: tmux takes it into its paste buffer.
t send-keys -t ui C
wait_for "copied the cursor to the clipboard"
buf=$(t show-buffer)
echo "$buf" | grep -Eq '^[0-9a-f]{16}-[0-9a-f]{16}$' || fail "the clipboard holds $buf, not a cursor"

# w writes the loaded events as JSON lines.
t send-keys -t ui w
wait_for "write 2 events to"
t send-keys -t ui Enter
wait_for "wrote 2 events to events-"
n=$(cat "$WORK"/events-*.jsonl | wc -l)
[ "$n" -eq 2 ] || fail "the file holds $n lines, want 2"

# The layout follows the terminal's size: the header stays on top, the status bar at the
# bottom (a line wider than the terminal would wrap and push them apart).
t resize-window -t ui -x 70 -y 20
wait_for "● LIVE"
screen | head -n 1 | grep -q "TIME.*TYPE" || fail "the first line is not the list's header"
screen | tail -n 2 | grep -qF "● LIVE" || fail "the status bar is not at the bottom"

# q ends with status 0 and gives the terminal back: main screen, cursor shown.
quit_ok
[ "$(t display -p -t ui '#{alternate_on}')" = 0 ] || fail "the terminal was left in the alternate screen"
[ "$(t display -p -t ui '#{cursor_flag}')" = 1 ] || fail "the cursor was left hidden"
[ "$(t display -p -t ui '#{mouse_any_flag}')" = 0 ] || fail "mouse reporting was left on"
t kill-server
echo ok
