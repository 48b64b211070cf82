package pvefake

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Ticket lifetime as in PVE (2 hours).
const ticketLifetime = 2 * time.Hour

func unauthorized(msg string) *apiError {
	return &apiError{Code: http.StatusUnauthorized, Message: msg}
}

// authenticate returns the authenticated user ("root@pam", or "root@pam!lab" for a token), with
// PVE's 401 wording on failure.
func (s *Server) authenticate(r *http.Request) (string, *apiError) {
	if h := r.Header.Get("Authorization"); h != "" {
		rest, ok := strings.CutPrefix(h, "PVEAPIToken=")
		if !ok {
			return "", unauthorized("No ticket")
		}

		id, secret, ok := strings.Cut(rest, "=")
		if !ok {
			return "", unauthorized("no tokenid specified")
		}

		user, name, ok := strings.Cut(id, "!")
		if !ok {
			return "", unauthorized(fmt.Sprintf("invalid API token ID '%s'", id))
		}

		s.mu.Lock()
		u, t := s.access.token(id)

		var want string
		if t != nil {
			want = t.secret
		}

		enabled := u != nil && u.enable
		s.mu.Unlock()

		if t == nil {
			return "", unauthorized(fmt.Sprintf("no such token '%s' for user '%s'", name, user))
		}

		if !enabled {
			return "", unauthorized(fmt.Sprintf("user '%s' is disabled", user))
		}

		if subtle.ConstantTimeCompare([]byte(want), []byte(secret)) != 1 {
			return "", unauthorized("invalid token value!")
		}

		return id, nil
	}

	cookie, err := r.Cookie("PVEAuthCookie")
	if err != nil || cookie.Value == "" {
		return "", unauthorized("No ticket")
	}

	user, ok := s.verifyTicket(cookie.Value)
	if !ok {
		return "", unauthorized("invalid PVE ticket")
	}

	if r.Method != http.MethodGet && !s.verifyCSRF(r.Header.Get("CSRFPreventionToken"), user) {
		return "", unauthorized("Permission denied - invalid csrf token")
	}

	return user, nil
}

// createTicket serves POST /access/ticket (password login).
func (s *Server) createTicket(c *call) (any, *apiError) {
	user, _ := c.param("username")
	password, _ := c.param("password")

	if realm, ok := c.param("realm"); ok && !strings.Contains(user, "@") {
		user += "@" + realm
	}

	s.mu.Lock()
	u := s.access.users[user]
	ok := u != nil && u.enable && u.password != ""

	var want string
	if ok {
		want = u.password
	}
	s.mu.Unlock()

	if !ok || subtle.ConstantTimeCompare([]byte(want), []byte(password)) != 1 {
		return nil, unauthorized("authentication failure")
	}

	now := time.Now().Unix()
	privs := map[string]int{"Sys.Audit": 1, "Sys.Modify": 1, "Datastore.Allocate": 1, "VM.Allocate": 1}

	return map[string]any{
		"username":            user,
		"ticket":              s.signTicket(user, now),
		"CSRFPreventionToken": s.signCSRF(user, now),
		"cap": map[string]any{
			"vms": privs, "storage": privs, "nodes": privs, "dc": privs, "access": privs,
		},
	}, nil
}

func (s *Server) mac(parts ...string) string {
	h := hmac.New(sha256.New, s.secret)
	h.Write([]byte(strings.Join(parts, ":")))

	return base64.RawStdEncoding.EncodeToString(h.Sum(nil))
}

// signTicket builds "PVE:<user>:<HEXTIME>::<signature>" like PVE's tickets.
func (s *Server) signTicket(user string, now int64) string {
	t := fmt.Sprintf("%08X", now)
	return "PVE:" + user + ":" + t + "::" + s.mac("ticket", user, t)
}

func (s *Server) verifyTicket(ticket string) (string, bool) {
	parts := strings.Split(ticket, ":")
	if len(parts) != 5 || parts[0] != "PVE" || parts[3] != "" {
		return "", false
	}

	user, t, sig := parts[1], parts[2], parts[4]
	if !hmac.Equal([]byte(sig), []byte(s.mac("ticket", user, t))) {
		return "", false
	}

	issued, err := strconv.ParseInt(t, 16, 64)
	if err != nil || time.Since(time.Unix(issued, 0)) > ticketLifetime {
		return "", false
	}

	return user, true
}

func (s *Server) signCSRF(user string, now int64) string {
	t := fmt.Sprintf("%08X", now)
	return t + ":" + s.mac("csrf", user, t)
}

func (s *Server) verifyCSRF(token, user string) bool {
	t, sig, ok := strings.Cut(token, ":")
	return ok && hmac.Equal([]byte(sig), []byte(s.mac("csrf", user, t)))
}

// isRootUser reports whether user is root@pam itself (not a token of it): PVE only lets that
// user set host PCI devices, args or arch.
func isRootUser(user string) bool { return user == "root@pam" }
