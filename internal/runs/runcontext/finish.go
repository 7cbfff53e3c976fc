package runcontext

import (
	"context"

	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/messaging"
	"bothy.example.com/bothy/internal/platform/problem"
)

// Finished is a run context with the answers its elements need to
// be finished (Finish): the authors, who of them holds trigger on the
// channel now, and which messages were already delivered. Service.Finish
// builds it; FollowUpsOf adds the answers of the run's follow-ups.
// It is not safe for concurrent use: a face finishes the elements, then
// reads the follow-ups at most once.
type Finished struct {
	// Context is the context built by Service.Build.
	Context *RunContext
	// Authors are the principals of every author of the elements (and,
	// once read, of the follow-ups), by id.
	Authors map[string]identity.Principal

	actor   identity.Principal
	answers Answers
	// followUps are the run's follow-ups in play as the facts statement
	// named them; their delivery is in answers.Delivered.
	followUps []string
}

// Finish returns element e of the context (or one of its follow-ups)
// finished: role, trust and already_delivered by RunContext.Finish with
// the answers read for it.
func (fc *Finished) Finish(e Element) FinishedElement {
	return fc.Context.Finish(e, fc.answers)
}

// followUpFacts is what FollowUpFacts answers.
type followUpFacts struct {
	delivered map[string]bool
	followUps []string
	err       error
}

// Finish is the finish step of a context read: it answers every
// question of rc's elements (RunContext.Keys) at once, for actor, the
// reader of rc. One statement answers already_delivered for every element
// and names the run's follow-ups (whose own delivery it answers too), so
// that the read costs the same statements with or without followUps; it
// does not depend on the authors and their trigger, so it runs on its own
// pool connection while those two are read, and only when a follow-up was
// on record as the run was read (rc.FollowUpsOnRecord; otherwise nothing
// was delivered and there are no follow-ups). The people read beside the
// window (rc.People) answer what they can; one statement reads the rest.
// Errors: any failing source fails the whole context (fail closed), an
// error is never read as "no trigger" or "not delivered"; an author that
// no longer exists is identity.ErrNotFound.
func (s *Service) Finish(ctx context.Context, actor identity.Principal, rc *RunContext) (*Finished, error) {
	keys := rc.Keys()
	facts := make(chan followUpFacts, 1)
	if rc.FollowUpsOnRecord {
		go func() {
			var f followUpFacts
			f.delivered, f.followUps, f.err = s.runs.FollowUpFacts(ctx, rc.SessionID, rc.RunID, keys.Delivered)
			facts <- f
		}()
	} else {
		facts <- followUpFacts{}
	}
	fc := &Finished{Context: rc, actor: contextReader(actor), Authors: make(map[string]identity.Principal, len(keys.Authors)),
		answers: Answers{Holders: map[string]bool{}}}
	peopleErr := s.answerPeople(ctx, fc, keys)
	f := <-facts
	if f.err != nil {
		return nil, problem.From("runcontext.finish", f.err)
	}
	if peopleErr != nil {
		return nil, peopleErr
	}
	fc.answers.Delivered, fc.followUps = f.delivered, f.followUps
	if fc.answers.Delivered == nil {
		fc.answers.Delivered = map[string]bool{}
	}
	return fc, nil
}

// answerPeople reads the authors of keys and the trigger-holder answers
// their trust needs into fc. The people read beside the window
// (RunContext.People) answer first; where some trust still needs the
// holder answer, one statement reads those authors and that answer
// together (authz's PeopleWithTrigger); authors still unknown are read by
// id (loadAuthors).
func (s *Service) answerPeople(ctx context.Context, fc *Finished, keys Keys) error {
	rc := fc.Context
	authors, ask := keys.Authors, keys.Holders
	if rc.People != nil {
		authors, ask = nil, nil
		for id, p := range rc.People {
			fc.Authors[id] = p
		}
		for _, id := range keys.Authors {
			if _, ok := rc.People[id]; !ok {
				authors = append(authors, id)
			}
		}
		for _, id := range keys.Holders {
			if _, ok := rc.People[id]; ok {
				fc.answers.Holders[id] = rc.Holders[id]
			} else {
				ask = append(ask, id)
			}
		}
	}
	if len(ask) > 0 {
		people, holders, err := s.authz.PeopleWithTrigger(ctx, rc.ChannelPath, authors, ask)
		if err != nil {
			// Fail closed: no answer is ever read as "has trigger".
			return problem.From("runcontext.answerPeople", err)
		}
		for id, p := range people {
			if _, known := fc.Authors[id]; !known {
				fc.Authors[id] = p
			}
		}
		for _, id := range ask {
			fc.answers.Holders[id] = holders[id]
		}
	}
	return s.loadAuthors(ctx, fc, keys.Authors)
}

// loadAuthors reads the principals of ids that fc does not know yet, in
// one statement. An id without a principal fails the context
// (identity.ErrNotFound), as does a failing read.
func (s *Service) loadAuthors(ctx context.Context, fc *Finished, ids []string) error {
	var missing []string
	for _, id := range ids {
		if _, ok := fc.Authors[id]; !ok {
			missing = append(missing, id)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	found, err := s.ident.GetMany(ctx, missing)
	if err != nil {
		return problem.Internal("runcontext.loadAuthors", err)
	}
	for _, id := range missing {
		p, ok := found[id]
		if !ok {
			return problem.From("runcontext.loadAuthors", identity.ErrNotFound)
		}
		fc.Authors[id] = p
	}
	return nil
}

// FollowUpsOf reads the follow-ups of fc's run still in play, oldest
// first, as context elements (the same read filter and cut as the thread
// elements), and answers their questions into fc, so that fc.Finish
// finishes them like the other elements. A run whose facts named no
// follow-up has none, without a statement. Errors: any failing source
// fails the follow-ups (and with them the context; fail closed).
func (s *Service) FollowUpsOf(ctx context.Context, fc *Finished) ([]Element, error) {
	rc := fc.Context
	if len(fc.followUps) == 0 {
		return []Element{}, nil
	}
	got, err := s.runs.FollowUps(ctx, []string{rc.RunID})
	if err != nil {
		return nil, problem.Internal("runcontext.FollowUpsOf", err)
	}
	elems := s.FollowUpElements(ctx, fc.actor, rc, got[rc.RunID])
	keys := rc.KeysOf(elems)
	if err := s.loadAuthors(ctx, fc, keys.Authors); err != nil {
		return nil, err
	}
	if err := s.answerHolders(ctx, fc, keys.Holders); err != nil {
		return nil, err
	}
	if err := s.answerDelivered(ctx, fc, keys.Delivered); err != nil {
		return nil, err
	}
	return elems, nil
}

// answerHolders answers, for those of ids fc has no answer for, whether
// they hold trigger on the context's channel now (one statement).
func (s *Service) answerHolders(ctx context.Context, fc *Finished, ids []string) error {
	var people []identity.Principal
	for _, id := range ids {
		if _, ok := fc.answers.Holders[id]; !ok {
			people = append(people, fc.Authors[id])
		}
	}
	if len(people) == 0 {
		return nil
	}
	holders, err := s.authz.WithTrigger(ctx, fc.Context.ChannelPath, people)
	if err != nil {
		// Fail closed: no answer is ever read as "has trigger".
		return problem.From("runcontext.answerHolders", err)
	}
	for _, p := range people {
		fc.answers.Holders[p.ID] = holders[p.ID]
	}
	return nil
}

// answerDelivered answers already_delivered for those of the follow-ups
// ids the facts statement did not name (follow-ups recorded since), in
// one statement.
func (s *Service) answerDelivered(ctx context.Context, fc *Finished, ids []string) error {
	named := make(map[string]bool, len(fc.followUps))
	for _, id := range fc.followUps {
		named[id] = true
	}
	var ask []string
	for _, id := range ids {
		if !named[id] {
			ask = append(ask, id)
		}
	}
	if len(ask) == 0 {
		return nil
	}
	rc := fc.Context
	got, err := s.runs.Delivered(ctx, rc.SessionID, rc.RunID, ask)
	if err != nil {
		return problem.From("runcontext.answerDelivered", err)
	}
	for _, id := range ask {
		fc.answers.Delivered[id] = got[id]
	}
	return nil
}

// FollowUpElements turns the follow-up messages of rc's run into context
// elements for actor: each passes the same read filter as the thread
// elements and is cut like them.
func (s *Service) FollowUpElements(ctx context.Context, actor identity.Principal, rc *RunContext, items []messaging.ContextItem) []Element {
	return s.readableElements(ctx, actor, items, rc.ThreadPath, rc.Grant, rc.ChannelPath.ChannelID, rc.MessageMaxBytes)
}
