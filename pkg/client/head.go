package client

import "context"

// Head returns the log's newest position: where a reader that starts at the head begins.
// "" means the log has never held an item (or the source knows of none): everything
// appended from now on comes after the log's start. Failures are retried as Stream retries
// them.
func (c *Client) Head(ctx context.Context, b Backoff, onRetry RetryFunc) (string, error) {
	_, newest, err := c.boundsRetry(ctx, b, onRetry)
	return newest, err
}
