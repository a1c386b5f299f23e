#!/bin/sh
# Runs `evtctl demo` in a detached tmux session of 80x24, as a user at a terminal would,
# and checks that the commands to try from another terminal can be read while its terminal
# UI runs, and work: the node they name answers them; and that the help screen, taller
# than the terminal, scrolls and always shows how to quit. Run by TestDemoTmux, which sets:
#
#   EVTCTL  the evtctl binary (the test binary, with EVTCTL_TEST_AS_MAIN=1)
#   WORK    an empty directory for the tmux socket
#
# It exits 0 when every check passes, and otherwise prints the failed check and the screen.
set -eu
: "${EVTCTL:?}" "${WORK:?}"

TMUX_UTF8=1
. "$(dirname "$0")/lib.sh"
# The commands on the screen say evtctl; here that is the test binary.
evtctl() { "$EVTCTL" "$@"; }

t new-session -d -s ui -x 80 -y 24 -c "$WORK" \
	"env EVTCTL_TEST_AS_MAIN=1 '$EVTCTL' demo --rate 20 --seed 1; echo \"exit=\$?\" > '$WORK/status'; exec sleep 60"

# The UI opens, and says where the commands are.
wait_for "● LIVE"
wait_for "press ? for commands to try"

# ? shows them, with the node's address.
t send-keys -t ui '?'
wait_for "Try from another terminal"
url=$(screen | grep -o 'http://127\.0\.0\.1:[0-9]*' | head -n 1)
[ -n "$url" ] || fail "no node address on the screen"
for cmd in "evtctl tail --node $url" "evtctl replay --node $url" "evtctl emit --node $url"; do
	screen | grep -qF -- "$cmd" || fail "the screen does not show: $cmd"
done

# While the UI runs, the node answers the commands shown, copied from the screen as they
# are (continuation lines and all).
screen | sed -n '/evtctl emit --node/,/^[^\\]*$/p' >"$WORK/emit.sh"
grep -q -- '--data' "$WORK/emit.sh" || fail "the emit command is cut: $(cat "$WORK/emit.sh")"
(. "$WORK/emit.sh") >"$WORK/emit.out" 2>&1 || fail "the emit command shown failed: $(cat "$WORK/emit.out")"
evtctl replay --node "$url" --limit 1 -o jsonl | grep -q '"event":"org.openedx.' || fail "the node does not answer replay"

# The help is taller than 24 lines: its last line says how to quit and scroll, and the
# end of it (the quit key, the remarks) is a key away.
screen | tail -n 2 | head -n 1 | grep -q '^  q quit · .*scroll' || fail "the line above the status bar does not say how to quit"
t send-keys -t ui End
wait_for "lost before they were read."
wait_for "q ctrl+c      quit, restoring the terminal"
screen | grep -qF "Try from another terminal" && fail "scrolled to the end, the notes are still in view"
screen | tail -n 2 | head -n 1 | grep -q '^  q quit · ' || fail "scrolled, the help does not say how to quit"
t send-keys -t ui Home
wait_for "Try from another terminal"

# Any key closes the help; q ends the demo with status 0.
t send-keys -t ui x
wait_for "TIME"
quit_ok "evtctl demo"
t kill-server
echo ok
