package httpx

import (
	"net/http"
	"strconv"
	"time"
)

// The header fields of the IETF httpapi draft "RateLimit header fields for
// HTTP" (draft-ietf-httpapi-ratelimit-headers-11): the policy of the quota
// a request spent from, and what is left of it.
const (
	RateLimitPolicyHeader = "RateLimit-Policy"
	RateLimitHeader       = "RateLimit"
)

// RateLimitFields are the values of both header fields for one quota
// policy: a token bucket named Policy that holds Quota requests and refills
// them over Window, of which Remaining are left and one more comes back
// after Reset.
type RateLimitFields struct {
	Policy    string
	Quota     int
	Window    time.Duration
	Remaining int
	Reset     time.Duration
}

// Set writes the fields into h as the draft spells them, for example
//
//	RateLimit-Policy: "rl.read";q=200;w=10
//	RateLimit: "rl.read";r=199;t=1
//
// The policy is a Structured Fields string in quotes (the rate-limit
// class names are lower-case letters, dots and underscores, which need no
// escaping); w and t are whole seconds rounded up
// like Retry-After (RetrySeconds), so that t of a refusal equals its
// Retry-After and a client waiting t seconds never comes back too early.
func (f RateLimitFields) Set(h http.Header) {
	name := `"` + f.Policy + `"`
	h.Set(RateLimitPolicyHeader, name+";q="+strconv.Itoa(f.Quota)+";w="+RetrySeconds(f.Window))
	h.Set(RateLimitHeader, name+";r="+strconv.Itoa(max(f.Remaining, 0))+";t="+RetrySeconds(f.Reset))
}
