package etcdbackup

import (
	"strings"
	"testing"
	"time"

	"filippo.io/age"
)

func TestParseRecipients(t *testing.T) {
	t.Parallel()

	a, _ := age.GenerateX25519Identity()
	b, _ := age.GenerateX25519Identity()

	got, err := ParseRecipients([]string{a.Recipient().String(), " " + b.Recipient().String() + "\n"})
	if err != nil || len(got) != 2 {
		t.Fatalf("ParseRecipients of two public keys = %d recipients, %v", len(got), err)
	}

	if none, err := ParseRecipients(nil); err != nil || len(none) != 0 {
		t.Errorf("ParseRecipients(nil) = %v, %v; want none and no error", none, err)
	}

	_, err = ParseRecipients([]string{a.Recipient().String(), "age1notakey", "", b.String(), "age1pq1abc"})
	for _, want := range []string{
		`recipients[1] "age1notakey" is not an age X25519 public key`,
		"recipients[2] is empty",
		"recipients[3] is an age secret key: give its public key",
		"recipients[4] is a post-quantum age recipient",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseRecipients = %v, want it to say %q", err, want)
		}
	}

	if err != nil && (strings.Contains(err.Error(), b.String()) || strings.Contains(err.Error(), "recipients[0]")) {
		t.Errorf("ParseRecipients = %v: it repeats a secret key or blames a valid recipient", err)
	}
}

func TestParseIdentity(t *testing.T) {
	t.Parallel()

	id, _ := age.GenerateX25519Identity()
	pq, _ := age.GenerateHybridIdentity()

	keyFile := "# created: 2026-11-27T13:05:09Z\n# public key: " + id.Recipient().String() + "\n" + id.String() + "\n"
	for _, text := range []string{id.String(), keyFile, id.String() + "\n" + pq.String()} {
		if ids, err := ParseIdentity(text); err != nil || len(ids) == 0 {
			t.Errorf("ParseIdentity = %d identities, %v", len(ids), err)
		}
	}

	secret := id.String()
	damaged := secret[:len(secret)-3] + "QQQ"

	for _, tc := range []struct{ text, want string }{
		{text: "", want: "the identity is empty"},
		{text: "# only a comment\n", want: "the identity is empty"},
		{text: damaged, want: "identity line 1 is not a valid age secret key"},
		{text: "# c\n" + strings.ToLower(secret), want: "identity line 2 is not an age secret key"},
		{text: id.Recipient().String(), want: "is an age public key"},
	} {
		_, err := ParseIdentity(tc.text)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseIdentity = %v, want an error saying %q", err, tc.want)
			continue
		}

		if strings.Contains(strings.ToUpper(err.Error()), secret[len("AGE-SECRET-KEY-1"):len(secret)-3]) {
			t.Errorf("ParseIdentity = %v: it repeats the key", err)
		}
	}
}

func TestParseSchedule(t *testing.T) {
	t.Parallel()

	from := time.Date(2026, 11, 27, 13, 5, 0, 0, time.UTC)

	for spec, next := range map[string]time.Time{
		"0 */6 * * *":  time.Date(2026, 11, 27, 18, 0, 0, 0, time.UTC),
		" 30 2 * * 0 ": time.Date(2026, 11, 29, 2, 30, 0, 0, time.UTC),
		"@daily":       time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC),
	} {
		s, err := ParseSchedule(spec)
		if err != nil {
			t.Errorf("ParseSchedule(%q) = %v", spec, err)
			continue
		}

		if got := s.Next(from); !got.Equal(next) || s.Spec != strings.TrimSpace(spec) {
			t.Errorf("ParseSchedule(%q): spec %q next %v, want next %v", spec, s.Spec, got, next)
		}
	}

	for spec, want := range map[string]string{
		"":                   "schedule is empty",
		"0 */6 * *":          "is not a 5-field cron schedule",
		"0 0 */6 * * *":      "is not a 5-field cron schedule",
		"61 * * * *":         "is not a 5-field cron schedule",
		"@every 1h":          "uses @every",
		"TZ=UTC 0 * * * *":   "sets a time zone",
		"CRON_TZ=UTC @daily": "sets a time zone",
	} {
		if _, err := ParseSchedule(spec); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseSchedule(%q) = %v, want an error saying %q", spec, err, want)
		}
	}
}

func TestValidateKeep(t *testing.T) {
	t.Parallel()

	if err := ValidateKeep(1); err != nil {
		t.Errorf("ValidateKeep(1) = %v", err)
	}

	for _, keep := range []int{0, -3} {
		if err := ValidateKeep(keep); err == nil || !strings.Contains(err.Error(), "at least 1") {
			t.Errorf("ValidateKeep(%d) = %v, want an error", keep, err)
		}
	}
}
