package capacity

// Search is the step search over load levels: level k is k times the
// base step (messages per second, listeners, runs per second). It doubles
// the level while steps pass, then halves the gap between the highest
// passing and the lowest failing level until they are neighbours, so that
// the first failure is bracketed in few steps (each step costs its
// duration of the machine's time).
type Search struct {
	// Max is the highest level tried (at least 1).
	Max int
	// good is the highest level that passed (0: none yet); bad the lowest
	// that failed (0: none yet).
	good, bad int
}

// Next returns the level to try next, or false when the search is over.
func (s *Search) Next() (int, bool) {
	max := s.Max
	if max < 1 {
		max = 1
	}
	if s.bad == 0 {
		if s.good == 0 {
			return 1, true
		}
		if s.good >= max {
			return 0, false
		}
		return min(s.good*2, max), true
	}
	if s.bad-s.good <= 1 {
		return 0, false
	}
	return (s.good + s.bad) / 2, true
}

// Record notes the outcome of a step at level.
func (s *Search) Record(level int, passed bool) {
	if passed {
		if level > s.good {
			s.good = level
		}
		return
	}
	if s.bad == 0 || level < s.bad {
		s.bad = level
	}
}

// Best is the highest level that passed (0: none), FirstFailure the
// lowest that failed (0: none failed up to Max).
func (s *Search) Best() int { return s.good }

// FirstFailure is the lowest level that failed (0: none did).
func (s *Search) FirstFailure() int { return s.bad }
