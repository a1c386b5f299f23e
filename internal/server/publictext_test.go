package server

import "testing"

func TestPublicText(t *testing.T) {
	for in, want := range map[string]string{
		"write /srv/data/00000001.seg: no space left on device": "write 00000001.seg: no space left on device",
		`open "/srv/data/HIGHWATER": permission denied`:         `open "HIGHWATER": permission denied`,
		`rename C:\data\a.tmp C:\data\a: access is denied`:      `rename a.tmp a: access is denied`,
		"dir=/srv/data/ (locked)":                               "dir=data (locked)",
		"/srv/data/x.seg":                                       "x.seg",
		"nats://nats1:4222/x: no responders":                    "nats://nats1:4222/x: no responders",
		"event log is unavailable: no quorum":                   "event log is unavailable: no quorum",
		"a/b relative stays":                                    "a/b relative stays",
	} {
		if got := publicText(in); got != want {
			t.Errorf("publicText(%q) = %q, want %q", in, got, want)
		}
	}
}
