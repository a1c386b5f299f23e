package lint_test

import (
	"fmt"

	"github.com/evtctl/evtctl/internal/lint"
)

func ExampleCheck() {
	event := []byte(`{
		"specversion": "1.0",
		"id": "b3b3981e-7544-11ea-b663-acde48001122",
		"source": "/openedx/lms/web",
		"type": "org.openedx.learning.course.enroll.v1",
		"time": "2020-02-23T09:43:18Z",
		"minorversion": 0,
		"pii": "false"
	}`)
	fs := lint.Check(event, lint.Options{})
	for _, f := range fs {
		fmt.Println(f)
	}
	fmt.Println("errors:", lint.HasErrors(fs))
	// Output:
	// warning source-absolute-uri: source: source "/openedx/lms/web" is not an absolute URI; OEP-41 asks for the URL of the emitting service, with a scheme, such as "https://discovery.edx.org/events/"
	// warning action-tense: type: action "enroll" of type "org.openedx.learning.course.enroll.v1" does not look like past tense; OEP-41 asks for past-tense actions such as created, updated or completed
	// error pii-boolean: pii: pii is the string "false"; it must be a JSON boolean: write false
	// errors: true
}
