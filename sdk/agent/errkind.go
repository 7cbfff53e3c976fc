package agent

import (
	"context"
	"errors"
	"net"
	"strings"
)

// The kinds of failure ErrorKind tells apart, for logs and metrics: an
// operator acts differently on each.
const (
	// KindModelTimeout: the model did not answer in time.
	KindModelTimeout = "model_timeout"
	// KindModelRefused: the model service refused the request (a status
	// 400 to 499: a bad key, a wrong model name, a quota).
	KindModelRefused = "model_refused"
	// KindModelUnavailable: the model service failed (status 500 to 599)
	// after the retries.
	KindModelUnavailable = "model_unavailable"
	// KindBadModelAnswer: the model answered, but with nothing usable
	// (empty, or not the shape of its API).
	KindBadModelAnswer = "bad_model_answer"
	// KindServerRefused: Bothy refused a call (its problem code names why).
	KindServerRefused = "server_refused"
	// KindNetwork: a connection failed.
	KindNetwork = "network"
	// KindCancelled: the run or the adapter was stopped.
	KindCancelled = "cancelled"
	// KindHandler: the handler failed the run (Task.Fail) or returned an
	// error of its own.
	KindHandler = "handler"
)

// ErrorKind classifies err into one of the Kind constants.
func ErrorKind(err error) string {
	var (
		httpErr *ModelHTTPError
		srvErr  *Error
		fail    *FailError
		netErr  net.Error
		bad     *BadAnswerError
	)
	switch {
	case err == nil:
		return ""
	case errors.As(err, &fail):
		return KindHandler
	case errors.Is(err, context.DeadlineExceeded):
		return KindModelTimeout
	case errors.Is(err, context.Canceled):
		return KindCancelled
	case errors.As(err, &httpErr):
		if httpErr.Status >= 500 {
			return KindModelUnavailable
		}
		return KindModelRefused
	case errors.As(err, &bad):
		return KindBadModelAnswer
	case errors.As(err, &srvErr):
		return KindServerRefused
	case errors.As(err, &netErr):
		if netErr.Timeout() {
			return KindModelTimeout
		}
		return KindNetwork
	case strings.Contains(err.Error(), "empty answer"):
		return KindBadModelAnswer
	default:
		return KindHandler
	}
}

// BadAnswerError is a model's answer that cannot be used: empty, or not in
// the shape of its API.
type BadAnswerError struct {
	Detail string
}

// Error names what was wrong, never the answer's text.
func (e *BadAnswerError) Error() string { return "agent: the model's answer is unusable: " + e.Detail }
