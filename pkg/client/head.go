package client

import (
	"context"
	"strings"
)

// Head returns the cursor of the newest item the node's log holds or has held: where a
// reader that starts at the head begins. "" means the log has never held an item (or the
// node knows of none): everything appended from now on comes after the log's start.
// Failures are retried as Stream retries them.
func (c *Client) Head(ctx context.Context, b Backoff, onRetry RetryFunc) (string, error) {
	r, err := c.probe(ctx, b, onRetry)
	if err != nil {
		return "", err
	}
	defer r.release()
	return strings.Clone(r.Newest), nil
}
