package events

import (
	"github.com/prometheus/client_golang/prometheus"
)

// StreamClient names the client event stream (event_log) in
// retention_horizon.
const StreamClient = "event_log"

// Instrument registers bothy_events_appended_total{stream} in reg. The
// count is of events written by units of work of this replica; a unit that
// rolls back after its append (rare: appends come last) still counts.
func (l *Log) Instrument(reg prometheus.Registerer) {
	l.appended = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bothy_events_appended_total",
		Help: "Events appended by this replica, by stream (client: event_log, agent: agent_events)."}, []string{"stream"})
	l.appended.WithLabelValues("client")
	l.appended.WithLabelValues("agent")
	reg.MustRegister(l.appended)
}

func (l *Log) count(client, agent int) {
	if l.appended == nil {
		return
	}
	l.appended.WithLabelValues("client").Add(float64(client))
	l.appended.WithLabelValues("agent").Add(float64(agent))
}
