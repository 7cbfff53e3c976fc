package signin

import (
	"context"
	"errors"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// recheckBatch bounds the sessions one pass asks the provider about; the
// rest wait for the next pass.
const recheckBatch = 500

// keepRefresh keeps the provider's refresh token of a new session, for
// the recheck of leavers. A session without one (the provider gave none)
// is not rechecked: it ends with its lifetime or when an owner disables
// the person. Failing to keep it must not fail the sign-in.
func (s *Service) keepRefresh(ctx context.Context, tokenID, principalID, refresh string) {
	if refresh == "" {
		s.log.InfoContext(ctx, "sign-in: the provider gave no refresh token; this session is not rechecked", "token_id", tokenID)
		return
	}
	if err := s.insertRefresh(ctx, tokenID, principalID, refresh, s.clock.Now()); err != nil {
		s.log.ErrorContext(ctx, "sign-in: keeping the refresh token failed; this session is not rechecked", "token_id", tokenID, "error", err.Error())
	}
}

// Recheck asks the provider every RecheckInterval, until ctx ends, whether
// each person with a live sign-in session may still sign in (Pass).
func (s *Service) Recheck(ctx context.Context) {
	t := time.NewTicker(s.cfg.RecheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := s.Pass(ctx); err != nil && ctx.Err() == nil {
				s.log.ErrorContext(ctx, "sign-in recheck failed; the next pass retries", "error", err.Error())
			}
		}
	}
}

// Pass rechecks the sessions not checked for RecheckInterval: a refresh
// grant at the provider for each. A refusal (invalid_grant: the account is
// gone, disabled or its grant revoked) revokes all the person's sign-in
// sessions and, through OnLeaver, disables the person as an owner's
// disable does. A provider that cannot be asked changes nothing. Sessions
// that ended are forgotten. It returns how many people it refused.
func (s *Service) Pass(ctx context.Context) (int, error) {
	due, err := s.dueRefresh(ctx, s.clock.Now().Add(-s.cfg.RecheckInterval), recheckBatch)
	if err != nil || len(due) == 0 {
		return 0, err
	}
	ids := make([]string, len(due))
	for i, r := range due {
		ids[i] = r.tokenID
	}
	live, err := s.ident.LiveSessions(ctx, ids)
	if err != nil {
		return 0, err
	}
	var dead []string
	for _, id := range ids {
		if !live[id] {
			dead = append(dead, id)
		}
	}
	if len(dead) > 0 {
		if err := s.dropRefresh(ctx, dead); err != nil {
			return 0, err
		}
	}
	p, err := s.discover(ctx)
	if err != nil {
		return 0, err
	}
	revoked := map[string]bool{}
	for _, r := range due {
		if !live[r.tokenID] || revoked[r.principalID] {
			continue
		}
		refused, err := s.checkOne(ctx, p, r)
		if err != nil {
			return len(revoked), err
		}
		if refused {
			revoked[r.principalID] = true
		}
	}
	return len(revoked), nil
}

// checkOne asks the provider about session r and, on a refusal, revokes
// the person's sessions; it reports whether it did.
func (s *Service) checkOne(ctx context.Context, p *oidc.Provider, r refreshRow) (bool, error) {
	octx := oidc.ClientContext(ctx, s.cfg.HTTPClient)
	// Client authentication by HTTP Basic, as every provider must take
	// it: with the library's guessing, a refusal would be retried with the
	// secret in the form, asking twice. An empty access token makes the
	// source refresh at once.
	oc := s.oauth(p)
	oc.Endpoint.AuthStyle = oauth2.AuthStyleInHeader
	tok, err := oc.TokenSource(octx, &oauth2.Token{RefreshToken: r.refresh}).Token()
	var re *oauth2.RetrieveError
	switch {
	case err == nil:
		next := tok.RefreshToken
		if next == "" {
			next = r.refresh // the provider keeps the old one valid
		}
		return false, s.checkedRefresh(ctx, r.tokenID, next, s.clock.Now())
	case errors.As(err, &re) && re.ErrorCode == "invalid_grant":
		return true, s.leaver(ctx, r.principalID)
	default:
		// Down, slow or confused: not a refusal of the person. The
		// session is asked again at the next pass.
		s.log.WarnContext(ctx, "sign-in recheck: the provider did not answer", "token_id", r.tokenID, "error", err.Error())
		return false, nil
	}
}

// leaver ends the person the provider refused: OnLeaver disables them and
// revokes their sign-in sessions (without it only the sessions end), then
// their refresh tokens are forgotten. A failure returns before the refresh
// tokens go, so that the next pass asks the provider again.
func (s *Service) leaver(ctx context.Context, principalID string) error {
	if s.cfg.OnLeaver != nil {
		if err := s.cfg.OnLeaver(ctx, principalID); err != nil {
			return err
		}
	} else if _, err := s.w.RevokeSessions(ctx, principalID); err != nil {
		return err
	}
	if err := s.dropPersonRefresh(ctx, principalID); err != nil {
		return err
	}
	s.log.InfoContext(ctx, "sign-in recheck: the provider refused the person; their sign-in sessions are revoked and they are disabled", "principal_id", principalID)
	return nil
}
