package cevent

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"
)

func fixedID() string { return "id-1" }

func TestFromSignal(t *testing.T) {
	const head = `{"specversion":"1.0","id":"id-1",`
	for _, tc := range []struct {
		name     string
		entity   string
		method   string
		target   string
		ct       string
		body     string
		want     string
		time     time.Time
		status   int
		msg      string
		limBytes int
	}{
		{name: "GET query", entity: "user-42", method: "GET", target: "/signal/user-42?_domain=web&_name=pageview&url=http%3A%2F%2Fx.example%2Fa&tag=a&tag=b;x=1+2&flag",
			want: head + `"source":"/signal/user-42","type":"web.pageview","subject":"user-42","datacontenttype":"application/json","data":{"url":"http://x.example/a","tag":["a","b"],"x":"1 2","flag":""}}`},
		{name: "GET without attributes", entity: "e", method: "GET", target: "/signal/e?_name=n&_domain=d",
			want: head + `"source":"/signal/e","type":"d.n","subject":"e","datacontenttype":"application/json","data":{}}`},
		{name: "POST form", entity: "e", method: "POST", target: "/signal/e", ct: "application/x-www-form-urlencoded",
			body: "_domain=twilio&_name=sms_received&_timestamp=Sun%2C+06+Nov+1994+08%3A49%3A37+GMT&from=%2B15551234567&body=hi+there",
			want: head + `"source":"/signal/e","type":"twilio.sms_received","subject":"e","time":"1994-11-06T08:49:37Z","datacontenttype":"application/json","data":{"from":"+15551234567","body":"hi there"}}`,
			time: time.Date(1994, 11, 6, 8, 49, 37, 0, time.UTC)},
		{name: "POST form with charset", entity: "e", method: "POST", target: "/signal/e", ct: "Application/X-WWW-Form-Urlencoded; charset=UTF-8",
			body: "_domain=a&_name=b", want: head + `"source":"/signal/e","type":"a.b","subject":"e","datacontenttype":"application/json","data":{}}`},
		{name: "POST JSON (spec example)", entity: "e", method: "POST", target: "/signal/e", ct: "application/json",
			body: "{\u201c_domain\u201d : 1}", status: 400, msg: "invalid JSON"},
		{name: "POST JSON", entity: "e", method: "POST", target: "/signal/e", ct: "application/json",
			body: `{"_domain" : "web", "_name" : "pageview", "urls" : ["http://www.exampley.com/foo/bar.html", "http://www.google.com/search"], "n": {"a": null}, "_private": 1}`,
			want: head + `"source":"/signal/e","type":"web.pageview","subject":"e","datacontenttype":"application/json","data":{"urls":["http://www.exampley.com/foo/bar.html","http://www.google.com/search"],"n":{"a":null},"_private":1}}`},
		{name: "POST JSON with RFC 3339 timestamp", entity: "e", method: "POST", target: "/signal/e", ct: "application/json",
			body: `{"_domain":"d","_name":"n","_timestamp":"2012-03-04T05:06:07.5-07:00"}`,
			want: head + `"source":"/signal/e","type":"d.n","subject":"e","time":"2012-03-04T12:06:07.5Z","datacontenttype":"application/json","data":{}}`,
			time: time.Date(2012, 3, 4, 12, 6, 7, 5e8, time.UTC)},
		{name: "RFC 850 timestamp", entity: "e", method: "GET", target: "/signal/e?_domain=d&_name=n&_timestamp=Sunday,+06-Nov-94+08:49:37+GMT",
			want: head + `"source":"/signal/e","type":"d.n","subject":"e","time":"1994-11-06T08:49:37Z","datacontenttype":"application/json","data":{}}`,
			time: time.Date(1994, 11, 6, 8, 49, 37, 0, time.UTC)},
		{name: "asctime timestamp", entity: "e", method: "GET", target: "/signal/e?_domain=d&_name=n&_timestamp=Sun+Nov++6+08:49:37+1994",
			want: head + `"source":"/signal/e","type":"d.n","subject":"e","time":"1994-11-06T08:49:37Z","datacontenttype":"application/json","data":{}}`,
			time: time.Date(1994, 11, 6, 8, 49, 37, 0, time.UTC)},
		{name: "empty timestamp means none", entity: "e", method: "GET", target: "/signal/e?_domain=d&_name=n&_timestamp=",
			want: head + `"source":"/signal/e","type":"d.n","subject":"e","datacontenttype":"application/json","data":{}}`},
		{name: "POST with empty body reads the query", entity: "e", method: "POST", target: "/signal/e?_domain=d&_name=n",
			want: head + `"source":"/signal/e","type":"d.n","subject":"e","datacontenttype":"application/json","data":{}}`},
		{name: "POST without content type, JSON", entity: "e", method: "POST", target: "/signal/e", body: ` {"_domain":"d","_name":"n"}`,
			want: head + `"source":"/signal/e","type":"d.n","subject":"e","datacontenttype":"application/json","data":{}}`},
		{name: "POST without content type, form", entity: "e", method: "POST", target: "/signal/e", body: `_domain=d&_name=n`,
			want: head + `"source":"/signal/e","type":"d.n","subject":"e","datacontenttype":"application/json","data":{}}`},
		{name: "entity needing escapes", entity: "a/b c%", method: "GET", target: "/signal/x?_domain=d&_name=n",
			want: head + `"source":"/signal/a%2Fb%20c%25","type":"d.n","subject":"a/b c%","datacontenttype":"application/json","data":{}}`},
		{name: "no entity", method: "GET", target: "/signal/?_domain=d&_name=n",
			want: head + `"source":"/signal","type":"d.n","datacontenttype":"application/json","data":{}}`},
		{name: "values needing JSON escapes", entity: "e", method: "GET", target: "/signal/e?_domain=d&_name=n&q=%22%5C%0A%C3%A9",
			want: head + `"source":"/signal/e","type":"d.n","subject":"e","datacontenttype":"application/json","data":{"q":"\"\\\né"}}`},

		{name: "missing _domain", entity: "e", method: "GET", target: "/signal/e?_name=n", status: 400, msg: "missing required signal key _domain"},
		{name: "empty _name", entity: "e", method: "GET", target: "/signal/e?_domain=d&_name=", status: 400, msg: "missing required signal key _name"},
		{name: "no query", entity: "e", method: "GET", target: "/signal/e", status: 400, msg: "missing required signal key _domain"},
		{name: "bad _domain", entity: "e", method: "GET", target: "/signal/e?_domain=a+b&_name=n", status: 400, msg: `_domain is "a b"; it must consist of letters, digits, '_', '.' and '-'`},
		{name: "bad _name", entity: "e", method: "GET", target: "/signal/e?_domain=a&_name=x:y", status: 400, msg: `_name is "x:y"`},
		{name: "repeated _domain", entity: "e", method: "GET", target: "/signal/e?_domain=a&_domain=b&_name=n", status: 400, msg: "signal key _domain is given more than once"},
		{name: "bad timestamp", entity: "e", method: "GET", target: "/signal/e?_domain=d&_name=n&_timestamp=yesterday", status: 400, msg: `_timestamp is "yesterday"; it must be an HTTP-date`},
		{name: "timestamp without zone", entity: "e", method: "GET", target: "/signal/e?_domain=d&_name=n&_timestamp=2012-03-04T05:06:07", status: 400, msg: "_timestamp is"},
		{name: "bad escape", entity: "e", method: "GET", target: "/signal/e?_domain=d&_name=n&x=%zz", status: 400, msg: `invalid URL encoding in the signal's query string at "x=%zz"`},
		{name: "empty key", entity: "e", method: "GET", target: "/signal/e?_domain=d&_name=n&=v", status: 400, msg: `empty key in the signal's query string at "=v"`},
		{name: "invalid UTF-8", entity: "e", method: "GET", target: "/signal/e?_domain=d&_name=n&x=%ff", status: 400, msg: "not valid UTF-8"},
		{name: "JSON _domain number", entity: "e", method: "POST", target: "/signal/e", ct: "application/json", body: `{"_domain":1,"_name":"n"}`, status: 400, msg: "signal key _domain must be a JSON string, not a number"},
		{name: "JSON _domain null", entity: "e", method: "POST", target: "/signal/e", ct: "application/json", body: `{"_domain":null,"_name":"n"}`, status: 400, msg: "missing required signal key _domain"},
		{name: "JSON array", entity: "e", method: "POST", target: "/signal/e", ct: "application/json", body: `[]`, status: 400, msg: "expected the signal as a JSON object"},
		{name: "JSON duplicate", entity: "e", method: "POST", target: "/signal/e", ct: "application/json", body: `{"_domain":"d","_name":"n","_name":"m"}`, status: 400, msg: `duplicate member name "_name"`},
		{name: "JSON trailing data", entity: "e", method: "POST", target: "/signal/e", ct: "application/json", body: `{"_domain":"d","_name":"n"} x`, status: 400, msg: "expected end of input"},
		{name: "query and body", entity: "e", method: "POST", target: "/signal/e?_domain=d", ct: "application/x-www-form-urlencoded", body: "_name=n", status: 400, msg: "both a query string and a body"},
		{name: "unsupported content type", entity: "e", method: "POST", target: "/signal/e", ct: "text/plain", body: "_domain=d", status: 415, msg: `unsupported Content-Type "text/plain" for an event signal`},
		{name: "PUT", entity: "e", method: "PUT", target: "/signal/e?_domain=d&_name=n", status: 405, msg: "method PUT is not allowed for an event signal: use POST or GET"},
		{name: "control character in entity", entity: "a\nb", method: "GET", target: "/signal/x?_domain=d&_name=n", status: 400, msg: "entity identifier"},
		{name: "blank entity", entity: " ", method: "GET", target: "/signal/x?_domain=d&_name=n", status: 400, msg: "entity identifier"},
		{name: "too large", entity: "e", method: "GET", target: "/signal/e?_domain=d&_name=n&x=" + strings.Repeat("y", 300), limBytes: 256, status: 413, msg: "the limit is 256 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, tc.target, strings.NewReader(tc.body))
			if tc.ct != "" {
				r.Header.Set("Content-Type", tc.ct)
			}
			ev, err := FromSignal(tc.entity, r, []byte(tc.body), Limits{MaxEventBytes: tc.limBytes}, fixedID)
			if tc.status != 0 {
				if err == nil {
					t.Fatalf("accepted: %s", ev.JSON)
				}
				checkError(t, err, tc.status, tc.msg)
				return
			}
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if string(ev.JSON) != tc.want {
				t.Errorf("stored\n %s\nwant\n %s", ev.JSON, tc.want)
			}
			if ev.ID != "id-1" {
				t.Errorf("ID = %q", ev.ID)
			}
			if !ev.Time.Equal(tc.time) {
				t.Errorf("Time = %v, want %v", ev.Time, tc.time)
			}
			checkAgainstJSON(t, ev)
		})
	}
}

func TestFromSignalDefaultID(t *testing.T) {
	r := httptest.NewRequest("GET", "/signal/e?_domain=d&_name=n", nil)
	a, err := FromSignal("e", r, nil, Limits{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := FromSignal("e", r, nil, Limits{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	uuidRE := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	if !uuidRE.MatchString(a.ID) || a.ID == b.ID {
		t.Errorf("IDs %q, %q: want two different random UUIDs", a.ID, b.ID)
	}
}

func TestHandleWebhookOptions(t *testing.T) {
	t.Run("handshake", func(t *testing.T) {
		r := httptest.NewRequest(http.MethodOptions, "/events", nil)
		r.Header.Set("WebHook-Request-Origin", "eventemitter.example.com")
		r.Header.Set("WebHook-Request-Rate", "120")
		w := httptest.NewRecorder()
		HandleWebhookOptions(w, r)
		if w.Code != http.StatusOK {
			t.Errorf("status %d", w.Code)
		}
		for k, want := range map[string]string{
			"WebHook-Allowed-Origin": "eventemitter.example.com",
			"WebHook-Allowed-Rate":   "*",
			"Allow":                  "OPTIONS, POST",
		} {
			if got := w.Header().Get(k); got != want {
				t.Errorf("%s: %q, want %q", k, got, want)
			}
		}
	})
	t.Run("no origin", func(t *testing.T) {
		w := httptest.NewRecorder()
		HandleWebhookOptions(w, httptest.NewRequest(http.MethodOptions, "/events", nil))
		if w.Code != http.StatusBadRequest || w.Header().Get("WebHook-Allowed-Origin") != "" {
			t.Errorf("status %d, headers %v", w.Code, w.Header())
		}
	})
	t.Run("wrong method", func(t *testing.T) {
		r := httptest.NewRequest(http.MethodGet, "/events", nil)
		r.Header.Set("WebHook-Request-Origin", "x")
		w := httptest.NewRecorder()
		HandleWebhookOptions(w, r)
		if w.Code != http.StatusMethodNotAllowed || w.Header().Get("WebHook-Allowed-Origin") != "" {
			t.Errorf("status %d, headers %v", w.Code, w.Header())
		}
	})
}
