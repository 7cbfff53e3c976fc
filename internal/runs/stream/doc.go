// Package stream is each agent's event stream as the runs module hands it
// out: the long poll (Poll, with its limit and cursors), the
// acknowledgement that stores the agent's position (Ack; the follow-ups it
// delivers are package runs' rows, reached through Deliver), the start and
// steps of a subscription, and the Hub that wakes waiting polls when any
// replica commits agent events (one LISTEN connection per process).
//
// It is a part of the runs module (docs/design/runs.md#invocations) and
// never imports package runs; runs keeps its exported names for it
// (runs.Hub, runs.Page, runs.Service.Poll, ...) as aliases and delegates.
package stream
