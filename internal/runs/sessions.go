package runs

import (
	"context"
	"strings"

	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/chat"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/ids"
	"bothy.example.com/bothy/internal/platform/problem"
)

// ExternalRefMax bounds the external reference of a bound session.
const ExternalRefMax = 200

// sessionAgent returns the agent whose session of thread threadID a person
// resets or binds: the thread's operator (fixed, or the channel's for a main
// thread). A thread without operator has no session to manage.
func (s *Service) sessionAgent(ctx context.Context, threadID string, p authz.Path) (string, error) {
	t, err := s.chat.GetThread(ctx, threadID)
	if err != nil {
		return "", problem.Internal("runs.sessionAgent", err)
	}
	agent := t.OperatorAgentID
	if t.Kind == chat.ThreadMain {
		agent = p.ChannelOperator
	}
	if agent == "" {
		return "", problem.Newf(problem.Conflict, "no_operator", "the thread has no operator agent")
	}
	return agent, nil
}

// ResetSession ends the current session of the thread's operator in thread
// threadID (agent.session.reset: trigger on the thread) and starts a fresh
// one, so that the next run starts anew (mode new).
func (s *Service) ResetSession(ctx context.Context, actor identity.Principal, threadID string) (Session, error) {
	return s.replaceSession(ctx, actor, authz.AgentSessionReset, threadID, false, "")
}

// BindSession makes a new current session of the thread's operator bound to
// externalRef (agent.session.bind: trigger on the thread): started, without
// runs, so the next run has mode bind.
func (s *Service) BindSession(ctx context.Context, actor identity.Principal, threadID, externalRef string) (Session, error) {
	ref := strings.TrimSpace(externalRef)
	if ref == "" || len(ref) > ExternalRefMax {
		return Session{}, problem.Invalid(problem.FieldError{Pointer: "/external_ref", Code: "invalid_length", Detail: "1 to 200 bytes"})
	}
	return s.replaceSession(ctx, actor, authz.AgentSessionBind, threadID, true, ref)
}

func (s *Service) replaceSession(ctx context.Context, actor identity.Principal, action authz.Action, threadID string, started bool, ref string) (Session, error) {
	_, path, err := s.authz.Authorize(ctx, actor, action, authz.Resource{Kind: authz.KindThread, ID: threadID})
	if err != nil {
		return Session{}, err
	}
	agent, err := s.sessionAgent(ctx, threadID, path)
	if err != nil {
		return Session{}, err
	}
	out := Session{ID: ids.New(), ThreadID: threadID, AgentID: agent, IsCurrent: true, Started: started, ExternalRef: ref, CreatedAt: s.st.clock.Now()}
	err = s.db.InTx(ctx, func(ctx context.Context) error {
		if _, err := s.chatW.LockThread(ctx, threadID); err != nil {
			return problem.Internal("runs.replaceSession: lock thread", err)
		}
		if err := s.st.retireSessions(ctx, threadID, agent); err != nil {
			return problem.Internal("runs.replaceSession: retire sessions", err)
		}
		if err := s.st.insertSession(ctx, out); err != nil {
			return problem.Internal("runs.replaceSession: insert session", err)
		}
		return nil
	})
	return out, err
}
