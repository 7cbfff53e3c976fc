package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The command line's sign-in (docs/operations.md#sign-in): bothy login runs
// the device grant through the server (POST /auth/device, then POST
// /auth/device/token until the person approved at the provider) and keeps
// the session token in the user's configuration folder; bothy logout ends
// it at the server (POST /auth/logout); bothy token show prints it.

// savedLogin is the file bothy login writes: the server and its session.
type savedLogin struct {
	Server string `json:"server"`
	Token  string `json:"token"`
}

// loginFile is where the session token is kept: bothy/token.json in the
// user's configuration folder (XDG_CONFIG_HOME or ~/.config on Linux).
func loginFile() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("no configuration folder for the token: %w", err)
	}
	return filepath.Join(dir, "bothy", "token.json"), nil
}

// httpClient reaches the server; each request is short (the polling is
// ours).
var httpClient = &http.Client{Timeout: 30 * time.Second}

// deviceStart is the server's answer to POST /auth/device (RFC 8628
// section 3.2).
type deviceStart struct {
	DeviceCode              string `json:"device_code"`
	UserCode                string `json:"user_code"`
	VerificationURI         string `json:"verification_uri"`
	VerificationURIComplete string `json:"verification_uri_complete"`
	ExpiresIn               int    `json:"expires_in"`
	Interval                int    `json:"interval"`
}

func cmdLogin(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("login", flag.ContinueOnError)
	fs.SetOutput(stderr)
	server := fs.String("server", "", "the server's URL (http.public_url), e.g. https://chat.example.com")
	fs.Usage = func() {
		fmt.Fprint(stdout, "Usage: bothy login --server URL\n\nSigns in through the server's identity provider (the device grant): open the URL it prints, enter the code,\nand the session token is kept in the user's configuration folder (mode 0600).\n")
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return usageError{err.Error()}
	}
	base := strings.TrimSuffix(*server, "/")
	if u, err := url.Parse(base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || fs.NArg() > 0 {
		return usagef("usage: bothy login --server URL (http or https)")
	}
	var d deviceStart
	if err := postJSON(ctx, base+"/auth/device", nil, "", &d); err != nil {
		return fmt.Errorf("login: %w", err)
	}
	fmt.Fprintf(stdout, "To sign in, open %s and enter the code %s\n", d.VerificationURI, d.UserCode)
	if d.VerificationURIComplete != "" {
		fmt.Fprintf(stdout, "(or open %s)\n", d.VerificationURIComplete)
	}
	tok, err := pollDevice(ctx, base, d)
	if err != nil {
		return fmt.Errorf("login: %w", err)
	}
	file, err := saveLogin(savedLogin{Server: base, Token: tok})
	if err != nil {
		return fmt.Errorf("login: %w", err)
	}
	fmt.Fprintf(stdout, "Signed in to %s; the session token is in %s\n", base, file)
	return nil
}

// pollDevice asks the server for the token every interval until the
// person approved, declined or the code expired; slow_down adds five
// seconds to the interval (RFC 8628 section 3.5).
func pollDevice(ctx context.Context, base string, d deviceStart) (string, error) {
	interval := time.Duration(max(d.Interval, 1)) * time.Second
	expires := time.Now().Add(time.Duration(max(d.ExpiresIn, 60)) * time.Second)
	for time.Now().Before(expires) {
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(interval):
		}
		var tr struct {
			AccessToken string `json:"access_token"`
		}
		err := postJSON(ctx, base+"/auth/device/token", url.Values{"device_code": {d.DeviceCode}}, "", &tr)
		var oe oauthError
		switch {
		case err == nil:
			return tr.AccessToken, nil
		case errors.As(err, &oe) && oe.code == "authorization_pending":
		case errors.As(err, &oe) && oe.code == "slow_down":
			interval += 5 * time.Second
		case errors.As(err, &oe) && oe.code == "access_denied":
			return "", errors.New("the sign-in was declined")
		case errors.As(err, &oe) && oe.code == "expired_token":
			return "", errors.New("the code expired; run bothy login again")
		default:
			return "", err
		}
	}
	return "", errors.New("the code expired; run bothy login again")
}

// oauthError is an OAuth error answer (400 {"error": code}).
type oauthError struct{ code string }

func (e oauthError) Error() string { return "the server answered " + e.code }

// postJSON posts form (nil: an empty body) with the bearer token (if any)
// and decodes a 200 answer into out. An OAuth error is an oauthError; a
// problem answer is an error with its detail, never with a token.
func postJSON(ctx context.Context, u string, form url.Values, token string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 == 2 {
		if out == nil {
			return nil
		}
		return json.Unmarshal(body, out)
	}
	var p struct {
		Error  string `json:"error"`
		Detail string `json:"detail"`
		Reason string `json:"reason"`
	}
	_ = json.Unmarshal(body, &p)
	switch {
	case p.Error != "":
		return oauthError{p.Error}
	case p.Detail != "":
		return statusError{resp.StatusCode, fmt.Sprintf("%s (%d %s)", p.Detail, resp.StatusCode, p.Reason)}
	}
	return statusError{resp.StatusCode, fmt.Sprintf("%s answered %d", u, resp.StatusCode)}
}

// statusError is a refusal of the server other than an OAuth error.
type statusError struct {
	status int
	msg    string
}

func (e statusError) Error() string { return e.msg }

// saveLogin writes l to the login file, readable by the user only, and
// returns its path. It writes a new file and renames it, so that a
// crash leaves the old token or the new one.
func saveLogin(l savedLogin) (string, error) {
	file, err := loginFile()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return "", err
	}
	b, _ := json.Marshal(l)
	tmp := file + ".new"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return "", err
	}
	// WriteFile keeps the mode of a file that exists: set it anyway.
	if err := os.Chmod(tmp, 0o600); err != nil {
		return "", err
	}
	return file, os.Rename(tmp, file)
}

// readLogin reads the login file.
func readLogin() (savedLogin, string, error) {
	file, err := loginFile()
	if err != nil {
		return savedLogin{}, "", err
	}
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return savedLogin{}, file, errors.New("not signed in: run bothy login --server URL")
	}
	var l savedLogin
	if err == nil && (json.Unmarshal(b, &l) != nil || l.Token == "" || l.Server == "") {
		err = fmt.Errorf("%s is not a file of bothy login", file)
	}
	return l, file, err
}

func cmdLogout(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) > 0 {
		if isHelp(args[0]) {
			fmt.Fprint(stdout, "Usage: bothy logout\n\nEnds the session of bothy login at its server and deletes the kept token.\n")
			return nil
		}
		return usagef("usage: bothy logout")
	}
	l, file, err := readLogin()
	if err != nil {
		return fmt.Errorf("logout: %w", err)
	}
	// 401: the session already ended (expired, revoked): nothing to end.
	var se statusError
	if err := postJSON(ctx, l.Server+"/auth/logout", nil, l.Token, nil); err != nil && !(errors.As(err, &se) && se.status == http.StatusUnauthorized) {
		return fmt.Errorf("logout: %w", err)
	}
	if err := os.Remove(file); err != nil {
		return fmt.Errorf("logout: %w", err)
	}
	fmt.Fprintf(stdout, "Signed out of %s\n", l.Server)
	return nil
}

func cmdTokenShow(args []string, stdout io.Writer) error {
	if len(args) > 0 {
		if isHelp(args[0]) {
			fmt.Fprint(stdout, "Usage: bothy token show\n\nPrints the session token of bothy login, e.g. curl -H \"Authorization: Bearer $(bothy token show)\".\n")
			return nil
		}
		return usagef("usage: bothy token show")
	}
	l, _, err := readLogin()
	if err != nil {
		return fmt.Errorf("token show: %w", err)
	}
	fmt.Fprintln(stdout, l.Token)
	return nil
}
