# Shared by the scripts of this folder, which source it once they have checked their
# environment (WORK among it). TMUX_UTF8=1 runs tmux with -u (UTF-8 whatever the locale);
# CAPTURE_JOIN=1 captures the screen with wrapped lines joined (-J).
sock="$WORK/tmux.sock"
t() {
	if [ "${TMUX_UTF8:-}" = 1 ]; then
		tmux -u -S "$sock" -f /dev/null "$@"
	else
		tmux -S "$sock" -f /dev/null "$@"
	fi
}
screen() {
	if [ "${CAPTURE_JOIN:-}" = 1 ]; then
		t capture-pane -p -J -t ui
	else
		t capture-pane -p -t ui
	fi
}
# fail says what failed, shows the screen and ends the script.
fail() {
	echo "FAIL: $*" >&2
	echo "--- the screen:" >&2
	screen >&2 || true
	t kill-server 2>/dev/null || true
	exit 1
}
# wait_for TEXT: wait (up to 20 s) until the screen shows TEXT, a fixed string.
wait_for() {
	i=0
	until screen | grep -qF -- "$1"; do
		i=$((i + 1))
		[ "$i" -lt 400 ] || fail "the screen never showed: $1"
		sleep 0.05
	done
}
# wait_gone TEXT: wait until the screen no longer shows TEXT.
wait_gone() {
	i=0
	while screen | grep -qF -- "$1"; do
		i=$((i + 1))
		[ "$i" -lt 400 ] || fail "the screen still shows: $1"
		sleep 0.05
	done
}
# quit_ok [WHAT]: press q, wait (up to 10 s) until the command's exit status is written to
# $WORK/status, and fail unless it is 0. WHAT names the command in a failure (evtctl).
quit_ok() {
	what=${1:-evtctl}
	t send-keys -t ui q
	i=0
	until [ -s "$WORK/status" ]; do
		i=$((i + 1))
		[ "$i" -lt 200 ] || fail "$what did not exit after q"
		sleep 0.05
	done
	grep -qx "exit=0" "$WORK/status" || fail "$what exited with $(cat "$WORK/status")"
}
