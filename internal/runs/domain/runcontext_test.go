package domain_test

import (
	"math/rand"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"bothy.example.com/bothy/internal/messaging"
	"bothy.example.com/bothy/internal/runs/domain"
)

// People and agents of the test world: Alex triggers the run, Sam has
// trigger on the channel, Robin is an owner without a grant (counts as a
// holder, D-M2-13-2 in docs/DECISIONS.md), writer has write only; Lotse is the run's agent and
// Texter another agent.
const (
	alex   = "alex"
	sam    = "sam"
	robin  = "robin"
	writer = "writer"
	lotse  = "lotse"
	texter = "texter"
)

func TestClassify(t *testing.T) {
	parties := domain.RunParties{AgentID: lotse, TriggeredBy: alex}
	// WithTrigger result of the run's channel: Sam (grant) and Robin (owner).
	holders := map[string]bool{sam: true, robin: true}
	// The same with Alex and Lotse listed too: neither may change their row.
	wide := map[string]bool{sam: true, robin: true, alex: true, lotse: true, texter: true, writer: true}

	tests := []struct {
		name    string
		origin  messaging.Origin
		author  string
		holders map[string]bool
		role    domain.Role
		trust   domain.Trust
	}{
		// One row per rule of docs/design/trust.md#classification.
		{"system line", "system", sam, holders, domain.RoleOther, domain.TrustSystem},
		{"import", "import", writer, holders, domain.RoleOther, domain.TrustUnverified},
		{"app", "app", "app-1", holders, domain.RoleOther, domain.TrustUnverified},
		{"agent is the run's agent", "agent", lotse, holders, domain.RoleAssistant, domain.TrustSelf},
		{"agent is another agent", "agent", texter, holders, domain.RoleOther, domain.TrustUnverified},
		{"human is triggered_by", "human", alex, holders, domain.RoleUser, domain.TrustTrigger},
		{"human in WithTrigger result", "human", sam, holders, domain.RoleUser, domain.TrustAuthorized},
		{"human otherwise", "human", writer, holders, domain.RoleUser, domain.TrustUnverified},

		// Origin decides before the author (D-M2-13-3 in docs/DECISIONS.md).
		{"import authored by the triggering person", "import", alex, holders, domain.RoleOther, domain.TrustUnverified},
		{"import authored by a holder", "import", sam, holders, domain.RoleOther, domain.TrustUnverified},
		{"system line authored by Alex", "system", alex, holders, domain.RoleOther, domain.TrustSystem},
		{"app listed as holder", "app", writer, wide, domain.RoleOther, domain.TrustUnverified},
		{"agent message of the run's agent listed in holders", "agent", lotse, wide, domain.RoleAssistant, domain.TrustSelf},
		{"other agent listed in holders", "agent", texter, wide, domain.RoleOther, domain.TrustUnverified},
		{"other agent whose id is triggered_by", "agent", alex, holders, domain.RoleOther, domain.TrustUnverified},
		{"human message carrying the run's agent id", "human", lotse, holders, domain.RoleUser, domain.TrustUnverified},

		// Author rows among humans.
		{"owner without grant is a holder", "human", robin, holders, domain.RoleUser, domain.TrustAuthorized},
		{"holder who is also triggered_by is trigger", "human", alex, wide, domain.RoleUser, domain.TrustTrigger},
		{"human with nil holders", "human", sam, nil, domain.RoleUser, domain.TrustUnverified},
		{"human listed as false", "human", writer, map[string]bool{writer: false}, domain.RoleUser, domain.TrustUnverified},

		// Unknown origins can never instruct the agent.
		{"unknown origin", "bot", alex, wide, domain.RoleOther, domain.TrustUnverified},
		{"empty origin", "", alex, wide, domain.RoleOther, domain.TrustUnverified},
		{"origin in another spelling", "Human", alex, wide, domain.RoleOther, domain.TrustUnverified},

		// The triggering message goes through the same table.
		{"the triggering message", "human", alex, holders, domain.RoleUser, domain.TrustTrigger},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			role, trust := domain.Classify(domain.AuthorFacts{Origin: tc.origin, AuthorID: tc.author}, parties, tc.holders)
			if role != tc.role || trust != tc.trust {
				t.Fatalf("Classify(origin=%q, author=%q) = %q/%q, want %q/%q", tc.origin, tc.author, role, trust, tc.role, tc.trust)
			}
		})
	}
}

func TestSessionMode(t *testing.T) {
	tests := []struct {
		name string
		s    *domain.SessionFacts
		want domain.Mode
	}{
		{"guest run has no session", nil, domain.ModeGuest},
		{"fresh session", &domain.SessionFacts{}, domain.ModeNew},
		{"never started with an earlier failed run", &domain.SessionFacts{Runs: 1}, domain.ModeNew},
		{"bound without runs", &domain.SessionFacts{Started: true, Bound: true}, domain.ModeBind},
		{"bound with a run", &domain.SessionFacts{Started: true, Bound: true, Runs: 1}, domain.ModeResume},
		{"started", &domain.SessionFacts{Started: true, Runs: 1}, domain.ModeResume},
		{"started with several runs", &domain.SessionFacts{Started: true, Runs: 3}, domain.ModeResume},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := domain.SessionMode(tc.s); got != tc.want {
				t.Fatalf("SessionMode(%+v) = %q, want %q", tc.s, got, tc.want)
			}
		})
	}
}

func TestPlanContext(t *testing.T) {
	const (
		thread = "thread-t"
		main   = "thread-main" // main thread of the channel, holds the parent message
	)
	inT := func(seq int64) domain.EarlierRun {
		return domain.EarlierRun{HasTrigger: true, TriggerThreadID: thread, TriggerSeq: seq}
	}
	noTrigger := domain.EarlierRun{}
	// A run without trigger whose locator fields are filled anyway: only
	// HasTrigger may count.
	staleNoTrigger := domain.EarlierRun{TriggerThreadID: thread, TriggerSeq: 50}

	// Everything visible from the start: floor zero, own messages, channel.
	fresh := func(mode domain.Mode) domain.ContextPlan {
		return domain.ContextPlan{Mode: mode, Floor: 0, ExcludeOwn: false, WantChannel: true}
	}
	resume := func(floor int64) domain.ContextPlan {
		return domain.ContextPlan{Mode: domain.ModeResume, Floor: floor, ExcludeOwn: true, WantChannel: false}
	}

	tests := []struct {
		name string
		f    domain.PlanFacts
		want domain.ContextPlan
	}{
		// Earlier runs are listed in the non-resume rows on purpose: only
		// mode resume may read them (D-M2-13-5), so each row can fail.
		{"guest", domain.PlanFacts{Mode: domain.SessionMode(nil), ThreadID: thread, Earlier: []domain.EarlierRun{inT(7)}}, fresh(domain.ModeGuest)},
		{"no session, mode new", domain.PlanFacts{Mode: domain.ModeNew, ThreadID: thread, Earlier: []domain.EarlierRun{inT(7)}}, fresh(domain.ModeNew)},
		{"started false with an earlier failed run", domain.PlanFacts{
			Mode:     domain.SessionMode(&domain.SessionFacts{Started: false, Runs: 1}),
			ThreadID: thread,
			Earlier:  []domain.EarlierRun{inT(7)},
		}, fresh(domain.ModeNew)},
		{"bind", domain.PlanFacts{
			Mode:     domain.SessionMode(&domain.SessionFacts{Started: true, Bound: true}),
			ThreadID: thread,
			Earlier:  []domain.EarlierRun{inT(7)},
		}, fresh(domain.ModeBind)},
		{"resume with the previous trigger in T", domain.PlanFacts{
			Mode:     domain.SessionMode(&domain.SessionFacts{Started: true, Runs: 2}),
			ThreadID: thread,
			Earlier:  []domain.EarlierRun{inT(12), inT(4)},
		}, resume(12)},
		{"resume whose previous trigger is the parent message", domain.PlanFacts{
			Mode:     domain.ModeResume,
			ThreadID: thread,
			// The latest run with a trigger decides even though an older
			// one lies in T: a thread_seq of the main thread is no floor.
			Earlier: []domain.EarlierRun{{HasTrigger: true, TriggerThreadID: main, TriggerSeq: 30}, inT(4)},
		}, resume(0)},
		{"resume whose latest earlier run has no trigger", domain.PlanFacts{
			Mode:     domain.ModeResume,
			ThreadID: thread,
			Earlier:  []domain.EarlierRun{noTrigger, inT(9), inT(3)},
		}, resume(9)},
		{"resume skips several runs without trigger", domain.PlanFacts{
			Mode:     domain.ModeResume,
			ThreadID: thread,
			Earlier:  []domain.EarlierRun{noTrigger, staleNoTrigger, inT(3)},
		}, resume(3)},
		{"resume with a run without trigger before a parent-message trigger", domain.PlanFacts{
			Mode:     domain.ModeResume,
			ThreadID: thread,
			Earlier:  []domain.EarlierRun{staleNoTrigger, {HasTrigger: true, TriggerThreadID: main, TriggerSeq: 30}, inT(2)},
		}, resume(0)},
		{"resume with no earlier run having a trigger", domain.PlanFacts{
			Mode:     domain.ModeResume,
			ThreadID: thread,
			Earlier:  []domain.EarlierRun{noTrigger, staleNoTrigger},
		}, resume(0)},
		{"resume without earlier runs", domain.PlanFacts{Mode: domain.ModeResume, ThreadID: thread}, resume(0)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := domain.PlanContext(tc.f); got != tc.want {
				t.Fatalf("PlanContext(%+v) = %+v, want %+v", tc.f, got, tc.want)
			}
		})
	}
}

func TestCutContent(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		max     int
		want    string
		wantCut bool
	}{
		{"below the limit", "hello", 10, "hello", false},
		{"equal to the limit", "hello", 5, "hello", false},
		{"above the limit", "hello", 4, "hell", true},
		{"multi-byte equal to the limit", "grüße", 7, "grüße", false},
		{"ü across the limit", "grüße", 3, "gr", true},
		{"ü just fits", "grüße", 4, "grü", true},
		{"lone ü across the limit", "ü", 1, "", true},
		{"€ across the limit by two", "a€b", 2, "a", true},
		{"€ across the limit by one", "a€b", 3, "a", true},
		{"€ just fits", "a€b", 4, "a€", true},
		{"😀 across the limit by three", "a😀b", 2, "a", true},
		{"😀 across the limit by two", "a😀b", 3, "a", true},
		{"😀 across the limit by one", "a😀b", 4, "a", true},
		{"😀 just fits", "a😀b", 5, "a😀", true},
		{"limit 0 on empty content", "", 0, "", false},
		{"limit 0 on ASCII", "x", 0, "", true},
		{"limit 0 on multi-byte", "😀", 0, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, cut := domain.CutContent(tc.in, tc.max)
			if got != tc.want || cut != tc.wantCut {
				t.Fatalf("CutContent(%q, %d) = %q, %v; want %q, %v", tc.in, tc.max, got, cut, tc.want, tc.wantCut)
			}
			if !utf8.ValidString(got) {
				t.Fatalf("CutContent(%q, %d) = %q is not valid UTF-8", tc.in, tc.max, got)
			}
			if len(got) > tc.max {
				t.Fatalf("CutContent(%q, %d) has %d bytes", tc.in, tc.max, len(got))
			}
		})
	}
}

func FuzzCutContent(f *testing.F) {
	f.Add("grüße", 3)
	f.Add("a€b", 2)
	f.Add("a😀b", 4)
	f.Add("", 0)
	f.Add("x", -1)
	f.Add("😀", -5)
	f.Add("\xff\xfe€", 2)
	f.Add("ab\xe2\x82", 3) // truncated €
	f.Add("\x80\x80\x80x", 2)
	f.Add("\xf0\x9f\x98", 10)
	f.Fuzz(func(t *testing.T, s string, limit int) {
		got, cut := domain.CutContent(s, limit)
		bound := max(limit, 0)
		if len(got) > bound {
			t.Fatalf("CutContent(%q, %d) = %q has %d bytes, above %d", s, limit, got, len(got), bound)
		}
		if !strings.HasPrefix(s, got) {
			t.Fatalf("CutContent(%q, %d) = %q is no prefix", s, limit, got)
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("CutContent(%q, %d) = %q is not valid UTF-8", s, limit, got)
		}
		if cut != (len(got) < len(s)) {
			t.Fatalf("CutContent(%q, %d) = %q, cut=%v", s, limit, got, cut)
		}
	})
}

// items builds budget candidates from alternating seq, bytes pairs.
func items(pairs ...int) []domain.Item {
	out := make([]domain.Item, 0, len(pairs)/2)
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, domain.Item{Seq: int64(pairs[i]), Bytes: pairs[i+1]})
	}
	return out
}

func seqs(in []domain.Item) []int64 {
	out := make([]int64, 0, len(in))
	for _, it := range in {
		out = append(out, it.Seq)
	}
	return out
}

func sumBytes(parts ...[]domain.Item) int {
	n := 0
	for _, p := range parts {
		for _, it := range p {
			n += it.Bytes
		}
	}
	return n
}

// checkBudget asserts the rules every FitBudget result follows: each kept
// part is a suffix of its input, channel elements are kept only when every
// thread element is, the sum stays within the limit, and the next older
// element, if any, would not have fitted (walk from the newest, stop at the
// first element that does not fit).
func checkBudget(t *testing.T, channel, thread, kc, kt []domain.Item, limit int) {
	t.Helper()
	if len(kt) > len(thread) || !slices.Equal(kt, thread[len(thread)-len(kt):]) {
		t.Fatalf("kept thread %v is no suffix of %v", kt, thread)
	}
	if len(kc) > len(channel) || !slices.Equal(kc, channel[len(channel)-len(kc):]) {
		t.Fatalf("kept channel %v is no suffix of %v", kc, channel)
	}
	if len(kc) > 0 && len(kt) != len(thread) {
		t.Fatalf("channel %v kept while thread elements were dropped (kept %v of %v)", kc, kt, thread)
	}
	sum := sumBytes(kc, kt)
	if sum > limit {
		t.Fatalf("kept %d bytes, limit %d", sum, limit)
	}
	all := append(slices.Clone(channel), thread...)
	kept := len(kc) + len(kt)
	if kept < len(all) {
		if next := all[len(all)-kept-1]; sum+next.Bytes <= limit {
			t.Fatalf("next older element %+v would fit (%d + %d <= %d) but was dropped", next, sum, next.Bytes, limit)
		}
	}
}

func TestFitBudget(t *testing.T) {
	// The triggering message is not an input of FitBudget: it is never cut
	// and never counted (docs/design/trust.md#cut-and-budget), so its size
	// cannot reduce the
	// budget of the context elements. The rows therefore use the whole
	// limit for channel and thread elements ("all fit exactly").
	tests := []struct {
		name        string
		channel     []domain.Item // main-thread messages before the parent, ascending
		thread      []domain.Item // messages of T before M, ascending
		limit       int
		wantChannel []int64
		wantThread  []int64
	}{
		{"newest kept, oldest dropped", nil, items(1, 10, 2, 10, 3, 10), 25, nil, []int64{2, 3}},
		{"all fit exactly, no room for a trigger needed", items(101, 5), items(1, 10, 2, 10), 25, []int64{101}, []int64{1, 2}},
		{"channel dropped before thread", items(101, 5, 102, 5), items(1, 10, 2, 10), 25, []int64{102}, []int64{1, 2}},
		{"all channel dropped, thread kept", items(101, 5, 102, 5), items(1, 10, 2, 10), 24, nil, []int64{1, 2}},
		{"thread cut drops all channel elements", items(101, 1), items(1, 10, 2, 10), 15, nil, []int64{2}},
		{"oversized thread element drops older fitting ones", items(101, 1), items(1, 1, 2, 100, 3, 5), 10, nil, []int64{3}},
		{"oversized channel element drops older fitting ones", items(101, 1, 102, 100), items(1, 5), 10, nil, []int64{1}},
		{"oversized newest element keeps nothing", items(101, 1), items(1, 1, 2, 100), 10, nil, nil},
		{"no gaps in the thread", nil, items(1, 2, 2, 9, 3, 2), 10, nil, []int64{3}},
		{"no gaps in the channel", items(101, 2, 102, 9), items(1, 2), 10, nil, []int64{1}},
		{"only channel elements", items(101, 4, 102, 4, 103, 4), nil, 8, []int64{102, 103}, nil},
		{"empty inputs", nil, nil, 10, nil, nil},
		{"zero budget keeps nothing", items(101, 1), items(1, 1, 2, 1), 0, nil, nil},
		{"zero budget keeps zero-byte newest elements", items(101, 0), items(1, 5, 2, 0, 3, 0), 0, nil, []int64{2, 3}},
		{"zero budget keeps all zero-byte elements", items(101, 0, 102, 0), items(1, 0), 0, []int64{101, 102}, []int64{1}},
		{"zero budget stops at the first non-empty channel element", items(101, 0, 102, 3, 103, 0), items(1, 0), 0, []int64{103}, []int64{1}},
		{"zero-byte elements older than a cut are dropped", nil, items(1, 0, 2, 7, 3, 4), 5, nil, []int64{3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			kc, kt := domain.FitBudget(tc.channel, tc.thread, tc.limit)
			if !slices.Equal(seqs(kc), tc.wantChannel) {
				t.Fatalf("kept channel %v, want %v", seqs(kc), tc.wantChannel)
			}
			if !slices.Equal(seqs(kt), tc.wantThread) {
				t.Fatalf("kept thread %v, want %v", seqs(kt), tc.wantThread)
			}
			checkBudget(t, tc.channel, tc.thread, kc, kt, tc.limit)
		})
	}

	t.Run("random inputs", func(t *testing.T) {
		rng := rand.New(rand.NewSource(13))
		gen := func(n int, firstSeq int64) []domain.Item {
			out := make([]domain.Item, n)
			for i := range out {
				b := rng.Intn(20)
				if rng.Intn(5) == 0 {
					b = 0
				}
				if rng.Intn(10) == 0 {
					b = 50 + rng.Intn(50) // larger than most budgets
				}
				out[i] = domain.Item{Seq: firstSeq + int64(i), Bytes: b}
			}
			return out
		}
		for i := range 5000 {
			channel := gen(rng.Intn(6), 100)
			thread := gen(rng.Intn(6), 1)
			limit := rng.Intn(60)
			inC, inT := slices.Clone(channel), slices.Clone(thread)
			kc, kt := domain.FitBudget(channel, thread, limit)
			if !slices.Equal(channel, inC) || !slices.Equal(thread, inT) {
				t.Fatalf("case %d: FitBudget changed its inputs", i)
			}
			checkBudget(t, channel, thread, kc, kt, limit)
		}
	})
}

func TestTruncatedBeforeSeq(t *testing.T) {
	const trigger = int64(40)
	tests := []struct {
		name          string
		hasOlder      bool
		budgetDropped bool
		kept          []domain.Item
		want          int64
		wantOK        bool
	}{
		{"HasOlder only", true, false, items(12, 3, 15, 3, 39, 3), 12, true},
		{"budget drop only", false, true, items(20, 3, 39, 3), 20, true},
		{"HasOlder and budget drop", true, true, items(33, 3), 33, true},
		{"nothing kept after HasOlder", true, false, nil, trigger, true},
		{"nothing kept after a budget drop", false, true, nil, trigger, true},
		{"nothing kept, empty slice", false, true, []domain.Item{}, trigger, true},
		{"nothing missing", false, false, items(1, 3, 2, 3), 0, false},
		{"nothing missing, nothing kept", false, false, nil, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := domain.TruncatedBeforeSeq(tc.hasOlder, tc.budgetDropped, tc.kept, trigger)
			if got != tc.want || ok != tc.wantOK {
				t.Fatalf("TruncatedBeforeSeq(%v, %v, %v, %d) = %d, %v; want %d, %v",
					tc.hasOlder, tc.budgetDropped, seqs(tc.kept), trigger, got, ok, tc.want, tc.wantOK)
			}
		})
	}

	// Together with FitBudget: the budget dropped thread elements exactly
	// when fewer came back than went in.
	t.Run("after FitBudget", func(t *testing.T) {
		thread := items(5, 10, 6, 10, 7, 10)
		_, kt := domain.FitBudget(nil, thread, 20)
		got, ok := domain.TruncatedBeforeSeq(false, len(kt) < len(thread), kt, trigger)
		if got != 6 || !ok {
			t.Fatalf("TruncatedBeforeSeq after FitBudget = %d, %v; want 6, true", got, ok)
		}
	})
}

func TestNeedsHolders(t *testing.T) {
	p := domain.RunParties{AgentID: "lotse", TriggeredBy: "alex"}
	for _, tc := range []struct {
		origin messaging.Origin
		author string
		want   bool
	}{
		{"human", "sam", true},
		{"human", "alex", false}, // the trigger is trust trigger without asking
		{"import", "sam", false},
		{"agent", "texter", false},
		{"app", "feedbot", false},
		{"system", "sam", false},
	} {
		if got := domain.NeedsHolders(domain.AuthorFacts{Origin: tc.origin, AuthorID: tc.author}, p); got != tc.want {
			t.Errorf("NeedsHolders(%s by %s) = %v, want %v", tc.origin, tc.author, got, tc.want)
		}
	}
}

func TestSummarizeTrust(t *testing.T) {
	u, s, y, a, g := domain.TrustUnverified, domain.TrustSelf, domain.TrustSystem, domain.TrustAuthorized, domain.TrustTrigger
	tests := []struct {
		name   string
		in     []domain.Trust
		lowest domain.Trust
		counts [5]int // unverified, self, system, authorized, trigger
	}{
		{"trigger only", []domain.Trust{g}, g, [5]int{0, 0, 0, 0, 1}},
		{"authorized below trigger", []domain.Trust{a, g}, a, [5]int{0, 0, 0, 1, 1}},
		{"system below authorized", []domain.Trust{a, y, g}, y, [5]int{0, 0, 1, 1, 1}},
		{"self below system", []domain.Trust{y, s, g}, s, [5]int{0, 1, 1, 0, 1}},
		{"unverified is lowest", []domain.Trust{s, y, a, u, g}, u, [5]int{1, 1, 1, 1, 1}},
		{"unverified first", []domain.Trust{u, u, g}, u, [5]int{2, 0, 0, 0, 1}},
		{"unknown level counts as unverified", []domain.Trust{"future", g}, u, [5]int{1, 0, 0, 0, 1}},
		{"upper case is unknown too", []domain.Trust{"TRIGGER"}, u, [5]int{1, 0, 0, 0, 0}},
		{"empty fails closed", nil, u, [5]int{}},
		{"many follow-ups of the trigger", []domain.Trust{g, g, g, a}, a, [5]int{0, 0, 0, 1, 3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := domain.SummarizeTrust(tc.in)
			if got.Lowest != tc.lowest {
				t.Errorf("lowest %s, want %s", got.Lowest, tc.lowest)
			}
			if len(got.Counts) != len(domain.TrustLevels()) {
				t.Fatalf("%d counts, want one per level", len(got.Counts))
			}
			for i, c := range got.Counts {
				if c.Trust != domain.TrustLevels()[i] || c.Count != tc.counts[i] {
					t.Errorf("count %d = %+v, want %s %d", i, c, domain.TrustLevels()[i], tc.counts[i])
				}
			}
		})
	}
}
