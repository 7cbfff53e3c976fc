package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oauth2-proxy/mockoidc"

	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/internal/platform/config"
	"bothy.example.com/bothy/internal/signin/signintest"
)

// syncBuffer is a buffer the command writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// codeLine is the line bothy login prints for the person.
var codeLine = regexp.MustCompile(`open (\S+) and enter the code (\S+)`)

// runLogin runs bothy login against env and, once it printed the code,
// approves it at p as user (or declines it); it returns the command's
// output and error.
func runLogin(t *testing.T, env *apitest.Env, p *signintest.Provider, user *mockoidc.MockUser, approve bool) (string, error) {
	t.Helper()
	var out, errOut syncBuffer
	done := make(chan error, 1)
	go func() { done <- run(context.Background(), []string{"login", "--server", env.URL}, &out, &errOut) }()
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if m := codeLine.FindStringSubmatch(out.String()); m != nil {
			if !strings.HasPrefix(m[1], p.Addr()) {
				t.Fatalf("login printed the verification URL %s, want the provider's", m[1])
			}
			if approve {
				p.Approve(m[2], user)
			} else {
				p.Deny(m[2])
			}
			break
		}
		if time.Now().After(end) {
			t.Fatalf("login printed no code: %s %s", out.String(), errOut.String())
		}
	}
	select {
	case err := <-done:
		return out.String(), err
	case <-time.After(20 * time.Second):
		t.Fatal("login did not end after the approval")
		return "", nil
	}
}

// TestLoginCommand: bothy login --server URL prints the provider's
// verification URL and code, polls until Alex approved there, and keeps
// the session token in the user's configuration folder with mode 0600;
// bothy token show prints it; bothy logout ends it at the server and
// deletes the file; a declined sign-in fails without a file.
func TestLoginCommand(t *testing.T) {
	cfgDir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", cfgDir)
	p := signintest.Start(t)
	env := apitest.Start(t, apitest.Options{Config: map[string]string{
		config.AuthOIDCIssuer: p.Issuer(), config.AuthOIDCClientID: p.ClientID, config.AuthOIDCClientSecret: p.ClientSecret,
		config.HTTPPublicURL: "https://chat.example.com",
	}})
	alex := &mockoidc.MockUser{Subject: "idp-alex", Email: "alex@example.com", EmailVerified: true}

	if _, err := runLogin(t, env, p, alex, false); err == nil || !strings.Contains(err.Error(), "declined") {
		t.Fatalf("a declined login: %v", err)
	}
	file := filepath.Join(cfgDir, "bothy", "token.json")
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("a declined login left %s: %v", file, err)
	}

	if out, err := runLogin(t, env, p, alex, true); err != nil || !strings.Contains(out, "Signed in to "+env.URL) {
		t.Fatalf("login: %v\n%s", err, out)
	}
	st, err := os.Stat(file)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the token file: %v, mode %v; want 0600", err, st.Mode())
	}
	tok := showAlexToken(t, env)

	var out bytes.Buffer
	if err := run(context.Background(), []string{"logout"}, &out, &out); err != nil {
		t.Fatalf("logout: %v %s", err, out.String())
	}
	wantMeStatus(t, env, tok, http.StatusUnauthorized, "the token after logout")
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("logout left %s: %v", file, err)
	}
	if err := run(context.Background(), []string{"token", "show"}, &out, &out); err == nil || !strings.Contains(err.Error(), "bothy login") {
		t.Fatalf("token show after logout: %v", err)
	}
}

// showAlexToken runs bothy token show and returns the token it prints,
// checking that the token signs in as alex.
func showAlexToken(t *testing.T, env *apitest.Env) string {
	t.Helper()
	var show bytes.Buffer
	if err := run(context.Background(), []string{"token", "show"}, &show, &show); err != nil {
		t.Fatal(err)
	}
	tok := strings.TrimSpace(show.String())
	r := env.REST(http.MethodGet, "/api/v1/me", tok, nil)
	var me struct{ Handle string }
	if r.Status == http.StatusOK {
		r.JSON(t, &me)
	}
	if me.Handle != "alex" {
		t.Fatalf("the shown token: %d %s, want alex", r.Status, r.Body)
	}
	return tok
}
