package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// fetchFile measures the transport a bench is held against: the file at path served by a
// loopback HTTP server of this process (sendfile where the system has it) and fetched
// whole, by curl when it is installed (as `curl -s -o /dev/null`), else by Go's HTTP
// client into nothing. It returns the time of the fetch and what fetched.
func fetchFile(ctx context.Context, path string, size int64) (time.Duration, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, "", err
	}
	dir, name := filepath.Split(path)
	hs := &http.Server{Handler: http.FileServer(http.Dir(dir)), ReadHeaderTimeout: 5 * time.Second}
	go hs.Serve(ln)
	defer hs.Close()
	url := "http://" + ln.Addr().String() + "/" + name
	if curl, err := exec.LookPath("curl"); err == nil {
		start := time.Now()
		out, err := exec.CommandContext(ctx, curl, "-s", "-S", "-f", "-o", "/dev/null", "-w", "%{size_download}", url).Output()
		d := time.Since(start)
		if err != nil {
			return 0, "", fmt.Errorf("curl: %v", err)
		}
		if got, _ := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64); got != size {
			return 0, "", fmt.Errorf("curl fetched %d bytes of %d", got, size)
		}
		return d, "curl", nil
	}
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	tr := &http.Transport{Proxy: nil, DisableCompression: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, "", errors.New("the file server answered " + resp.Status)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	d := time.Since(start)
	if err != nil {
		return 0, "", err
	}
	if n != size {
		return 0, "", fmt.Errorf("fetched %d bytes of %d", n, size)
	}
	return d, "Go's HTTP client (curl is not installed)", nil
}
