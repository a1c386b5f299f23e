package filter_test

import (
	"fmt"

	"github.com/evtctl/evtctl/pkg/filter"
)

func ExampleCompile() {
	_, err := filter.Compile("tm.event = Tx")
	fmt.Println(err)
	// Output: offset 11: got tag, wanted number, timestamp, datestamp or string
}

func ExampleQuery_MatchJSON() {
	q, err := filter.Compile(`type MATCHES 'org.openedx.learning.#' AND data.user.id = 42 AND time = DATE 2026-11-22`)
	if err != nil {
		panic(err)
	}
	event := `{"specversion":"1.0","id":"a1","source":"openedx/lms/web",` +
		`"type":"org.openedx.learning.course.enrollment.created.v1","time":"2026-11-22T10:00:00Z",` +
		`"data":{"user":{"id":42,"name":"ann"},"tags":["a","b"]}}`
	fmt.Println(q.MatchJSON([]byte(event)))
	// Output: true
}
