package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/mattn/go-runewidth"
	"github.com/rogpeppe/go-internal/testscript"
)

func init() {
	scriptCmds["onterm"] = cmdOnTerm
	scriptCmds["fits"] = cmdFits
}

// cmdOnTerm runs evtctl as a child process with stdout and stderr on a pseudo-terminal
// COLS columns wide; what the terminal received becomes the command's stdout, with
// \r\n as \n. Its exit status must be 0 (with !, not 0).
//
//	onterm COLS evtctl ARGS...
func cmdOnTerm(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 2 || args[1] != "evtctl" {
		ts.Fatalf("usage: onterm COLS evtctl ARGS...")
	}
	cols, err := strconv.Atoi(args[0])
	ts.Check(err)
	cmd := exec.Command(os.Args[0], args[2:]...)
	cmd.Dir = ts.MkAbs(".")
	env := []string{"EVTCTL_TEST_AS_MAIN=1", "TERM=xterm-256color"}
	for _, k := range []string{"EVTCTL_NODE", "EVTCTL_TOKEN", "HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME", "NO_COLOR", "PATH", "TMPDIR", "TZ"} {
		if v := ts.Getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	cmd.Env = env
	term, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: uint16(cols), Rows: 50})
	if err != nil {
		ts.Fatalf("onterm: no pseudo-terminal: %v", err)
	}
	defer term.Close()
	var out bytes.Buffer
	_, err = io.Copy(&out, term) // ends with EIO once the child's side is closed
	var pe *os.PathError
	if err != nil && !errors.As(err, &pe) {
		ts.Fatalf("onterm: reading the terminal: %v", err)
	}
	err = cmd.Wait()
	ts.Stdout().Write(bytes.ReplaceAll(out.Bytes(), []byte("\r\n"), []byte("\n")))
	if (err != nil) != neg {
		ts.Fatalf("onterm: evtctl: %v", err)
	}
}

var csi = regexp.MustCompile("\x1b\\[[0-9;?]*[A-Za-z]")

// cmdFits checks that every line of the last stdout (what a terminal was sent; escape
// sequences aside, a carriage return starting the line again) takes at most COLS columns.
//
//	fits COLS
func cmdFits(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: fits COLS")
	}
	cols, err := strconv.Atoi(args[0])
	ts.Check(err)
	for i, line := range strings.Split(ts.ReadFile("stdout"), "\n") {
		for _, seg := range strings.Split(csi.ReplaceAllString(line, ""), "\r") {
			if w := runewidth.StringWidth(seg); w > cols {
				ts.Fatalf("line %d takes %d columns, more than %d: %q", i+1, w, cols, seg)
			}
		}
	}
}

// prettyEvents are OEP-41 events as Open edX services send them: long types, course keys
// as subjects, nested data with personal details, names in wide characters, and text that
// a terminal would act on. The last has no data.
func prettyEvents(n int) []byte {
	types := []string{
		"org.openedx.learning.course.enrollment.created.v1",
		"org.openedx.content_authoring.course.catalog_info.changed.v1",
		"org.openedx.learning.student.registration.completed.v1",
		"org.openedx.learning.course.passing.status.updated.v1",
		"org.openedx.content_authoring.xblock.published.v1",
		"org.openedx.learning.certificate.created.v1",
	}
	subjects := []string{"course-v1:edX+DemoX+Demo_Course", "course-v1:東京大学+UTokyoX+2026_T1", "block-v1:MITx+6.002x+2026+type@problem+block@q1"}
	names := []string{"Ada Lovelace", "王小明", "Zoë Ørsted 👩‍🔬", "\u001b[31mLuc\u009b2J"}
	js := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			panic(err)
		}
		return string(b)
	}
	var events []map[string]any
	start := time.Now().UTC().Truncate(time.Second)
	for i := range n {
		// The data's members in the order a producer would write them: the name first.
		data := fmt.Sprintf(`{"name":%s,"user":{"id":%d,"is_active":true,"pii":{"username":"learner%d","email":"learner%d@example.com"}},`+
			`"course":{"course_key":%s,"display_name":"Demonstration Course","start":"2026-01-01T00:00:00Z"},"mode":"verified","note":"tab\there"}`,
			js(names[i%len(names)]), 1000+i, i, i, js(subjects[i%len(subjects)]))
		ev := map[string]any{
			"specversion": "1.0", "id": fmt.Sprintf("5e9f5a4c-c8b1-11ee-a506-%012d", i),
			"source": "openedx/lms/web", "type": types[i%len(types)], "subject": subjects[i%len(subjects)],
			"datacontenttype": "application/json", "minorversion": 0, "pii": true,
			"time": start.Add(time.Duration(i) * 37_123_457 * time.Nanosecond).Format(time.RFC3339Nano),
			"data": json.RawMessage(data),
		}
		if i == n-1 {
			delete(ev, "data")
			delete(ev, "datacontenttype")
		}
		events = append(events, ev)
	}
	b, err := json.Marshal(events)
	if err != nil {
		panic(err)
	}
	return b
}

// TestPrettyTmux runs evtctl tail on a terminal (tmux) 80 and 120 columns wide against a
// node holding OEP-41 events, and checks what the screen shows: every line fits, one line
// per event, and the columns line up. The test binary stands in for evtctl. It is skipped
// where tmux is missing.
func TestPrettyTmux(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed: the pretty lines on a terminal are not checked")
	}
	if testing.Short() {
		t.Skip("drives a terminal")
	}
	const n = 24
	node, err := startEmbedded(embeddedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	resp, err := http.Post(node.URL+"/events", "application/cloudevents-batch+json", bytes.NewReader(prettyEvents(n)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("seeding the node: status %d", resp.StatusCode)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, width := range []int{80, 120} {
		t.Run(fmt.Sprint(width), func(t *testing.T) {
			screen := tmuxRun(t, self, width, fmt.Sprintf("env EVTCTL_TEST_AS_MAIN=1 EVTCTL_NODE=%s %s tail --from-start --count %d", node.URL, self, n))
			checkPrettyScreen(t, screen, width, n)
		})
	}
}

// tmuxRun runs command in a detached tmux session width columns wide, waits for it to
// end, and returns everything its terminal showed, wrapped lines joined.
func tmuxRun(t *testing.T, self string, width int, command string) []string {
	t.Helper()
	work := t.TempDir()
	sock := filepath.Join(work, "tmux.sock")
	status := filepath.Join(work, "status")
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TMUX=") && !strings.HasPrefix(kv, "NO_COLOR=") && !strings.HasPrefix(kv, "COLUMNS=") {
			env = append(env, kv)
		}
	}
	env = append(env, "TERM=xterm-256color")
	tmux := func(args ...string) ([]byte, error) {
		cmd := exec.Command("tmux", append([]string{"-u", "-S", sock, "-f", "/dev/null"}, args...)...)
		cmd.Env = env
		return cmd.CombinedOutput()
	}
	defer tmux("kill-server")
	// The pane stays open after the command (sleep), so that its screen can be read.
	script := fmt.Sprintf("%s; echo $? > %s; exec sleep 60", command, status)
	if out, err := tmux("new-session", "-d", "-s", "pretty", "-x", fmt.Sprint(width), "-y", "50", "sh", "-c", script); err != nil {
		t.Fatalf("tmux new-session: %v: %s", err, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(status)
		if err == nil && bytes.HasSuffix(b, []byte("\n")) {
			if s := strings.TrimSpace(string(b)); s != "0" {
				t.Errorf("the command exited %s", s)
			}
			break
		}
		if time.Now().After(deadline) {
			out, _ := tmux("capture-pane", "-p", "-t", "pretty")
			t.Fatalf("the command did not end; the screen:\n%s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if out, err := tmux("display-message", "-p", "-t", "pretty", "#{pane_width}"); err != nil || strings.TrimSpace(string(out)) != fmt.Sprint(width) {
		t.Fatalf("the pane is %q columns wide (%v), want %d", out, err, width)
	}
	out, err := tmux("capture-pane", "-p", "-J", "-S", "-", "-E", "-", "-t", "pretty")
	if err != nil {
		t.Fatalf("tmux capture-pane: %v: %s", err, out)
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	return lines
}

var prettyTime = regexp.MustCompile(`^[0-2][0-9]:[0-5][0-9]:[0-5][0-9]\.[0-9]{3}  `)

// checkPrettyScreen checks the lines of tail -o pretty on a terminal width columns wide:
// a line announcing the tail on stderr, then n events.
func checkPrettyScreen(t *testing.T, lines []string, width, n int) {
	t.Helper()
	show := func() string { return strings.Join(lines, "\n") }
	var events []string
	for _, l := range lines {
		if w := runewidth.StringWidth(l); w > width {
			t.Errorf("a line of %d columns on a terminal of %d (it wrapped):\n%s", w, width, l)
		}
		if prettyTime.MatchString(l) {
			events = append(events, strings.TrimRight(l, " "))
		} else if l != "" && !strings.HasPrefix(l, "following ") {
			t.Errorf("a line that is neither an event nor the tail's notice: %q", l)
		}
	}
	if len(events) != n {
		t.Fatalf("%d event lines, want %d; the screen:\n%s", len(events), n, show())
	}
	// Cells start after runs of two spaces or more; every event line has them at the same
	// columns (the last event has no data, so one cell fewer).
	starts := func(l string) []int {
		var s []int
		col, spaces := 0, 0
		for _, r := range l {
			if r != ' ' && (col == 0 || spaces >= 2) {
				s = append(s, col)
			}
			if r == ' ' {
				spaces++
			} else {
				spaces = 0
			}
			col += runewidth.RuneWidth(r)
		}
		return s
	}
	want := starts(events[0])
	if len(want) < 3 {
		t.Fatalf("the first event line has %d cells: %q", len(want), events[0])
	}
	for i, l := range events {
		got := starts(l)
		if i == n-1 {
			want = want[:len(want)-1]
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("event %d: cells start at columns %v, not %v as on the first line:\n%s\n%s", i+1, got, want, events[0], l)
		}
	}
	if !strings.Contains(show(), "enrollment.created.v1  ") || !strings.Contains(show(), "…") {
		t.Errorf("the informative end of the type is not shown:\n%s", show())
	}
	if strings.ContainsAny(show(), "\x1b\u009b") || !strings.Contains(show(), `"\u001b[31mLuc\u009b2J"`) {
		t.Errorf("control characters are not shown as escapes:\n%s", show())
	}
	t.Logf("at %d columns:\n%s", width, show())
}
