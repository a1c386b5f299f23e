package forward

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strconv"
)

// The Standard Webhooks headers.
const (
	HeaderWebhookID        = "Webhook-Id"
	HeaderWebhookTimestamp = "Webhook-Timestamp"
	HeaderWebhookSignature = "Webhook-Signature"
)

// Sign returns the Standard Webhooks signature of a message: "v1," and the base64 of the
// HMAC-SHA256, under key, of the message id, the timestamp (Unix seconds) and the body,
// joined by dots.
func Sign(key []byte, id string, timestamp int64, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write(strconv.AppendInt(nil, timestamp, 10))
	m.Write([]byte{'.'})
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// signHeaders sets the three Standard Webhooks headers on h.
func signHeaders(h http.Header, key []byte, id string, timestamp int64, body []byte) {
	h[HeaderWebhookID] = []string{id}
	h[HeaderWebhookTimestamp] = []string{strconv.FormatInt(timestamp, 10)}
	h[HeaderWebhookSignature] = []string{Sign(key, id, timestamp, body)}
}
