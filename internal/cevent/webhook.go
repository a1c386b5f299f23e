package cevent

import "net/http"

// HandleWebhookOptions answers the abuse-protection preflight of the
// CloudEvents HTTP webhook specification: an OPTIONS request carrying
// WebHook-Request-Origin gets 200 with WebHook-Allowed-Origin echoing that
// origin, WebHook-Allowed-Rate "*" (no rate limit) and Allow. An OPTIONS
// request without that header gets 400; any other method gets 405.
func HandleWebhookOptions(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Allow", "OPTIONS, POST")
	if r.Method != http.MethodOptions {
		http.Error(w, "method not allowed: the webhook handshake uses OPTIONS", http.StatusMethodNotAllowed)
		return
	}
	origin := r.Header.Get("WebHook-Request-Origin")
	if origin == "" {
		http.Error(w, "missing WebHook-Request-Origin header", http.StatusBadRequest)
		return
	}
	w.Header().Set("WebHook-Allowed-Origin", origin)
	w.Header().Set("WebHook-Allowed-Rate", "*")
	w.WriteHeader(http.StatusOK)
}
