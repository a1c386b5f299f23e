package peer

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// Real failures of real round trips, each classified.
func TestClassify(t *testing.T) {
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer plain.Close()
	secure := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer secure.Close()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()
	garbage, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer garbage.Close()
	go func() {
		for {
			c, err := garbage.Accept()
			if err != nil {
				return
			}
			io.WriteString(c, "SSH-2.0-OpenSSH_9.6\r\n")
			c.Close()
		}
	}()
	get := func(u string) error {
		resp, err := http.Get(u)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	for _, tc := range []struct {
		name string
		err  error
		want Failure
	}{
		{"refused", get("http://" + closedAddr + "/"), NoListener},
		{"https to plain http", get("https://" + strings.TrimPrefix(plain.URL, "http://") + "/"), PlainHTTP},
		{"https to something else", get("https://" + garbage.Addr().String() + "/"), NotTLS},
		{"untrusted certificate", get(secure.URL + "/"), Certificate},
		{"no such host", &url.Error{Op: "Post", URL: "http://x", Err: &net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", Name: "x", IsNotFound: true}}}, NoSuchHost},
		{"dns timeout", &net.DNSError{Err: "i/o timeout", Name: "x", IsTimeout: true}, Transient},
		{"tls alert", &net.OpError{Op: "remote error", Err: errors.New("tls: handshake failure")}, TLSFailure},
		{"reset", fmt.Errorf("read: %w", errors.New("connection reset by peer")), Transient},
		{"eof", io.EOF, Transient},
		{"nil", nil, Transient},
	} {
		if got := Classify(tc.err); got != tc.want {
			t.Errorf("%s: Classify(%v) = %d, want %d", tc.name, tc.err, got, tc.want)
		}
	}

	// Plain HTTP to a TLS port is answered, with a 400 that says so.
	resp, err := http.Get("http://" + strings.TrimPrefix(secure.URL, "https://") + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !WantsTLS(resp.StatusCode, body) {
		t.Errorf("http to a TLS port: %d %q not recognised", resp.StatusCode, body)
	}
	if WantsTLS(400, []byte(`{"error":"malformed query string"}`)) {
		t.Error("an ordinary 400 taken for a TLS port")
	}
}

func TestText(t *testing.T) {
	pythonPage := `<!DOCTYPE HTML>
<html lang="en">
    <head>
        <meta charset="utf-8">
        <title>Error response</title>
    </head>
    <body>
        <h1>Error response</h1>
        <p>Error code: 501</p>
        <p>Message: Unsupported method (&#x27;POST&#x27;).</p>
        <p>Error code explanation: 501 - Server does not support this operation.</p>
    </body>
</html>
`
	nginx := "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx/1.25.3</center>\r\n</body>\r\n</html>\r\n"
	for _, tc := range []struct {
		in   string
		max  int
		want string
		form Form
	}{
		{"", 0, "", EmptyBody},
		{" \n ", 0, "", EmptyBody},
		{`{"error":"the bearer token is not valid"}`, 0, "the bearer token is not valid", JSONBody},
		{`{"message":"scripted 400"}`, 0, "scripted 400", JSONBody},
		{`{"error":{"message":"nested"}}`, 0, "nested", JSONBody},
		{`{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"Internal error","data":"bad cursor"}}`, 0, "bad cursor", JSONBody},
		{`{"detail":"x"}`, 0, `{"detail":"x"}`, JSONBody},
		{`["a", "b"]`, 0, `["a", "b"]`, JSONBody},
		{pythonPage, 0, "Error response Error code: 501 Message: Unsupported method ('POST'). Error code explanation: 501 - Server does not support this operation.", HTMLBody},
		{pythonPage, 40, "Error response Error code: 501 Message:…", HTMLBody},
		{nginx, 0, "502 Bad Gateway nginx/1.25.3", HTMLBody},
		{"<html><head><title>Oops</title></head><body><p>Try later</p><script>var x = 1;</script></body></html>", 0, "Oops: Try later", HTMLBody},
		{"404 page not found\n", 0, "404 page not found", TextBody},
		{"line one\n\n  line two\t", 0, "line one line two", TextBody},
		{"héllo wörld", 2, "h…", TextBody},
		{"bad \xff byte", 0, "bad \uFFFD byte", TextBody},
	} {
		if got := Text([]byte(tc.in), tc.max); got != tc.want {
			t.Errorf("Text(%.40q, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
		}
		if got := FormOf([]byte(tc.in)); got != tc.form {
			t.Errorf("FormOf(%.40q) = %d, want %d", tc.in, got, tc.form)
		}
	}
}
