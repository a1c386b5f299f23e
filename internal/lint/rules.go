package lint

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// problem is what a rule check reports; Check adds the rule's id and severity.
type problem struct{ path, msg string }

// rule is one entry of the rule table.
type rule struct {
	id       string
	severity Severity
	summary  string
	check    func(e *event, o Options) []problem
}

const ruleSpec = "spec"

// rules is the rule table, applied in order. The "spec" rule must come
// first: it marks the attributes the other rules then leave alone.
var rules = []rule{
	{ruleSpec, SeverityError, "the event conforms to CloudEvents 1.0 in the JSON format", checkSpec},
	{"size", SeverityError, "the event is at most 64 KiB in its compact JSON form", checkSize},
	{"id-uuid1", SeverityWarning, "id is a version 1 UUID in lower case with dashes", checkIDUUID1},
	// A warning, not an error: OEP-41 asks for an absolute URI, but Open edX services emit
	// sources such as "openedx/lms/web" in production, and lint must not reject those.
	{"source-absolute-uri", SeverityWarning, "source is an absolute URI such as https://discovery.edx.org/events/", checkSourceAbsolute},
	{"type-shape", SeverityError, "type is {reverse DNS}.{domain}.{subject}.{action}.v{major} in lower case with underscores", checkTypeShape},
	{"action-tense", SeverityWarning, "the action of the type (the part before the version) is in the past tense", checkActionTense},
	{"time-present", SeverityWarning, "the event has a time", checkTimePresent},
	{"time-utc", SeverityError, "time is in UTC (offset Z or +00:00)", checkTimeUTC},
	{"extension-name", SeverityWarning, "extension names are at most 20 characters", checkExtensionName},
	{"minorversion-present", SeverityWarning, "the event has a minorversion extension", checkMinorversionPresent},
	{"minorversion-integer", SeverityError, "minorversion is a JSON integer of 0 or more", checkMinorversionInteger},
	{"pii-present", SeverityWarning, "the event has a pii extension", checkPIIPresent},
	{"pii-boolean", SeverityError, "pii is a JSON boolean", checkPIIBoolean},
}

func one(path, format string, args ...any) []problem {
	return []problem{{path, fmt.Sprintf(format, args...)}}
}

func checkSize(e *event, o Options) []problem {
	if e.size <= o.MaxBytes {
		return nil
	}
	limit := fmt.Sprintf("%d bytes", o.MaxBytes)
	if o.MaxBytes%1024 == 0 {
		limit += fmt.Sprintf(" (%d KiB)", o.MaxBytes/1024)
	}
	return one("", "event is %d bytes in compact JSON; the limit is %s: keep data small, e.g. send keys rather than whole records", e.size, limit)
}

const exampleUUID1 = "b3b3981e-7544-11ea-b663-acde48001122"

func checkIDUUID1(e *event, _ Options) []problem {
	id, ok := e.str("id")
	if !ok {
		return nil
	}
	canon := strings.ToLower(strings.TrimPrefix(strings.Trim(id, "{}"), "urn:uuid:"))
	if len(canon) == 32 {
		canon = canon[:8] + "-" + canon[8:12] + "-" + canon[12:16] + "-" + canon[16:20] + "-" + canon[20:]
	}
	if !isUUID(canon) {
		return one("id", "id %q is not a UUID; OEP-41 asks for a version 1 UUID such as %q", id, exampleUUID1)
	}
	if canon != id {
		return one("id", "id %q should be written in lower case with dashes: %q", id, canon)
	}
	if v := canon[14]; v != '1' {
		return one("id", "id %q is a version %c UUID; OEP-41 asks for a version 1 (time-based) UUID such as %q", id, v, exampleUUID1)
	}
	return nil
}

// isUUID reports whether s is a UUID in lower-case 8-4-4-4-12 form.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				return false
			}
		}
	}
	return true
}

// checkSourceAbsolute applies OEP-41, which is stricter than CloudEvents
// (a URI-reference): "This is an absolute URI that represents the URL of
// the server emitting the event."
func checkSourceAbsolute(e *event, _ Options) []problem {
	src, ok := e.str("source")
	if !ok {
		return nil
	}
	if u, err := url.Parse(src); err != nil || u.Scheme != "" {
		return nil // a parse error is the spec rule's business
	}
	return one("source", "source %q is not an absolute URI; OEP-41 asks for the URL of the emitting service, with a scheme, such as \"https://discovery.edx.org/events/\"", src)
}

const exampleType = "org.openedx.learning.student.registration.completed.v1"

var versionRE = regexp.MustCompile(`^v[1-9][0-9]*$`)

func checkTypeShape(e *event, _ Options) []problem {
	t, ok := e.str("type")
	if !ok {
		return nil
	}
	var ps []problem
	add := func(format string, args ...any) {
		ps = append(ps, problem{"type", fmt.Sprintf(format, args...)})
	}
	lower := strings.ToLower(t)
	if lower != t {
		add("type %q must be lower case: %q", t, lower)
	}
	for _, r := range lower {
		if r == '-' {
			add("type %q contains '-': join the words of a part with underscores, e.g. content_authoring", t)
			break
		}
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '_' && r != '.' {
			add("type %q contains %q: each dot-separated part may hold only lower-case letters, digits and underscores", t, r)
			break
		}
	}
	parts := strings.Split(lower, ".")
	for _, p := range parts {
		if p == "" {
			add("type %q has an empty part: remove the leading, trailing or doubled dot", t)
			break
		}
	}
	if len(parts) < 5 {
		add("type %q has %d dot-separated parts; OEP-41 asks for at least 5, {reverse DNS}.{domain}.{subject}.{action}.v{major}, e.g. %q", t, len(parts), exampleType)
	}
	if !versionRE.MatchString(parts[len(parts)-1]) {
		add("type %q must end in its major version: \".v\" and a number from 1 without leading zeros, e.g. \".v1\"", t)
	}
	return ps
}

func checkActionTense(e *event, _ Options) []problem {
	t, ok := e.str("type")
	if !ok {
		return nil
	}
	parts := strings.Split(strings.ToLower(t), ".")
	if len(parts) < 3 || !versionRE.MatchString(parts[len(parts)-1]) {
		return nil // no recognisable action; type-shape says why
	}
	action := parts[len(parts)-2]
	if action == "" || isPastTense(action) {
		return nil
	}
	return one("type", "action %q of type %q does not look like past tense; OEP-41 asks for past-tense actions such as created, updated or completed", action, t)
}

func checkTimePresent(e *event, _ Options) []problem {
	if _, ok := e.attrs["time"]; ok {
		return nil
	}
	return one("time", "event has no time; OEP-41 asks for the time the event occurred, in UTC, e.g. \"2020-02-23T09:43:18Z\"")
}

func checkTimeUTC(e *event, _ Options) []problem {
	s, ok := e.str("time")
	if !ok || strings.HasSuffix(s, "Z") || strings.HasSuffix(s, "+00:00") {
		return nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return nil // the spec rule's business
	}
	return one("time", "time %q is not in UTC; OEP-41 asks for UTC: %q", s, t.UTC().Format(time.RFC3339Nano))
}

// contextAttrs are the attributes CloudEvents defines; other members are
// extensions.
var contextAttrs = map[string]bool{
	"specversion": true, "id": true, "source": true, "type": true, "subject": true, "time": true,
	"datacontenttype": true, "dataschema": true, "data": true, "data_base64": true,
}

func checkExtensionName(e *event, _ Options) []problem {
	var ps []problem
	seen := map[string]bool{}
	for _, m := range e.members {
		if contextAttrs[m.name] || e.bad[m.name] || seen[m.name] || len(m.name) <= 20 {
			continue
		}
		seen[m.name] = true
		ps = append(ps, problem{m.name, fmt.Sprintf("extension name %q is %d characters; CloudEvents asks for at most 20 so that every protocol binding can carry it", m.name, len(m.name))})
	}
	return ps
}

func checkMinorversionPresent(e *event, _ Options) []problem {
	if _, ok := e.attrs["minorversion"]; ok {
		return nil
	}
	return one("minorversion", "event has no minorversion extension; OEP-41 asks for one: an integer that starts at 0 and grows with each backwards-compatible change to data, e.g. \"minorversion\": 0")
}

var uintRE = regexp.MustCompile(`^(0|[1-9][0-9]*)$`)

func checkMinorversionInteger(e *event, _ Options) []problem {
	raw, ok := e.attrs["minorversion"]
	if !ok || e.bad["minorversion"] {
		return nil
	}
	v := string(raw)
	switch {
	case uintRE.MatchString(v):
		return nil
	case raw[0] == '"':
		if s, ok := e.str("minorversion"); ok && uintRE.MatchString(s) {
			return one("minorversion", "minorversion is the string %s; it must be a JSON integer: write %s", v, s)
		}
		return one("minorversion", "minorversion is the string %s; it must be a JSON integer of 0 or more, e.g. 0", v)
	case raw[0] == '-':
		return one("minorversion", "minorversion is %s; it must be 0 or more", v)
	}
	return one("minorversion", "minorversion is %s; it must be a JSON integer of 0 or more, e.g. 0", v)
}

func checkPIIPresent(e *event, _ Options) []problem {
	if _, ok := e.attrs["pii"]; ok {
		return nil
	}
	return one("pii", "event has no pii extension; OEP-41 asks for one: true if the event carries personally identifiable information, else false")
}

func checkPIIBoolean(e *event, _ Options) []problem {
	raw, ok := e.attrs["pii"]
	if !ok || e.bad["pii"] {
		return nil
	}
	v := string(raw)
	if v == "true" || v == "false" {
		return nil
	}
	if s, ok := e.str("pii"); ok && (s == "true" || s == "false") {
		return one("pii", "pii is the string %s; it must be a JSON boolean: write %s", v, s)
	}
	return one("pii", "pii is %s; it must be a JSON boolean, true or false", v)
}
