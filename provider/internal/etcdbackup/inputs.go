package etcdbackup

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"filippo.io/age"
	"github.com/robfig/cron/v3"
)

// ParseRecipients reads age X25519 recipients (age1…), the public keys snapshots are encrypted
// to. Each invalid one is named by its index; all problems are reported at once.
func ParseRecipients(keys []string) ([]age.Recipient, error) {
	var (
		recipients []age.Recipient
		problems   []error
	)

	for i, k := range keys {
		k = strings.TrimSpace(k)

		switch {
		case k == "":
			problems = append(problems, fmt.Errorf("recipients[%d] is empty: give an age public key (age1…, from age-keygen)", i))
		case strings.HasPrefix(k, "AGE-SECRET-KEY-"):
			// A secret key where a public one belongs: say so without repeating it.
			problems = append(problems, fmt.Errorf("recipients[%d] is an age secret key: give its public key (age-keygen -y prints it) and keep the secret key out of the configuration", i))
		case strings.HasPrefix(k, "age1pq1"):
			problems = append(problems, fmt.Errorf("recipients[%d] is a post-quantum age recipient: talos-backup encrypts only to X25519 recipients (age1…, from age-keygen without -pq)", i))
		default:
			r, err := age.ParseX25519Recipient(k)
			if err != nil {
				problems = append(problems, fmt.Errorf("recipients[%d] %q is not an age X25519 public key (age1…, from age-keygen)", i, k))
				continue
			}

			recipients = append(recipients, r)
		}
	}

	if err := errors.Join(problems...); err != nil {
		return nil, err
	}

	return recipients, nil
}

// ParseIdentity reads the age identity that decrypts snapshots: one AGE-SECRET-KEY-1… line, or the
// contents of an age-keygen key file (comment lines and several keys allowed). Errors name the
// line, never the key.
func ParseIdentity(text string) ([]age.Identity, error) {
	var ids []age.Identity

	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}

		var (
			id  age.Identity
			err error
		)

		switch {
		case strings.HasPrefix(line, "AGE-SECRET-KEY-PQ-1"):
			id, err = age.ParseHybridIdentity(line)
		case strings.HasPrefix(line, "AGE-SECRET-KEY-1"):
			id, err = age.ParseX25519Identity(line)
		case strings.HasPrefix(line, "age1"):
			return nil, fmt.Errorf("identity line %d is an age public key: the identity is the secret key (AGE-SECRET-KEY-1…) of the key pair", i+1)
		default:
			return nil, fmt.Errorf("identity line %d is not an age secret key: it must start with AGE-SECRET-KEY-1", i+1)
		}

		if err != nil {
			// age's own message may quote part of the key: say only which line is wrong.
			return nil, fmt.Errorf("identity line %d is not a valid age secret key: check that it was copied whole", i+1)
		}

		ids = append(ids, id)
	}

	if len(ids) == 0 {
		return nil, errors.New("the identity is empty: give the age secret key (AGE-SECRET-KEY-1…) that decrypts the snapshots")
	}

	return ids, nil
}

// Schedule is a validated 5-field cron schedule, as a Kubernetes CronJob takes it.
type Schedule struct {
	// Spec is the schedule as given (trimmed).
	Spec     string
	schedule cron.Schedule
}

// Next is the first time after t the schedule fires.
func (s Schedule) Next(t time.Time) time.Time { return s.schedule.Next(t) }

// scheduleParser reads what a Kubernetes CronJob's schedule takes: 5 fields or @hourly-style
// descriptors (without @every).
var scheduleParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseSchedule checks a standard 5-field cron schedule (minute hour day-of-month month
// day-of-week, e.g. "0 */6 * * *") or a descriptor (@hourly, @daily, @weekly, @monthly, @yearly).
func ParseSchedule(spec string) (Schedule, error) {
	spec = strings.TrimSpace(spec)

	switch {
	case spec == "":
		return Schedule{}, errors.New(`schedule is empty: give a 5-field cron schedule such as "0 */6 * * *" (every 6 hours)`)
	case strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ="):
		return Schedule{}, fmt.Errorf("schedule %q sets a time zone, which a Kubernetes CronJob does not accept in its schedule: give the 5 fields in UTC", spec)
	case strings.HasPrefix(spec, "@every"):
		return Schedule{}, fmt.Errorf("schedule %q uses @every, which a Kubernetes CronJob does not accept: give 5 cron fields, e.g. \"0 */6 * * *\"", spec)
	}

	s, err := scheduleParser.Parse(spec)
	if err != nil {
		return Schedule{}, fmt.Errorf("schedule %q is not a 5-field cron schedule (minute hour day-of-month month day-of-week, e.g. \"0 */6 * * *\"): %w", spec, err)
	}

	return Schedule{Spec: spec, schedule: s}, nil
}

// ValidateKeep checks how many snapshots to keep: at least one.
func ValidateKeep(keep int) error {
	if keep < 1 {
		return fmt.Errorf("keep is %d: at least 1 snapshot must be kept", keep)
	}

	return nil
}
