// Package schedule reads the schedules of scheduled jobs: "@every
// DURATION", a descriptor (@hourly, @daily, @weekly, @monthly, @yearly),
// or five cron fields (minute hour day-of-month month day-of-week), and
// says when one is next due. Cron fields are read in UTC.
package schedule

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// MinEvery is the shortest "@every" interval a schedule accepts.
const MinEvery = time.Second

// parser reads five cron fields and the descriptors; seconds are not a
// field (a job is not run more often than "@every" says).
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Schedule is a parsed schedule. The zero value is never due.
type Schedule struct {
	text  string
	every time.Duration
	cron  cron.Schedule
}

// Parse reads text. An error says what a schedule looks like.
func Parse(text string) (Schedule, error) {
	t := strings.TrimSpace(text)
	if t == "" {
		return Schedule{}, fmt.Errorf(`empty schedule: want "@every 1h", a descriptor such as "@daily", or five cron fields such as "0 3 * * *"`)
	}
	if rest, ok := strings.CutPrefix(t, "@every "); ok {
		d, err := time.ParseDuration(strings.TrimSpace(rest))
		if err != nil {
			return Schedule{}, fmt.Errorf(`schedule %q: %q is not a duration (want "@every 30s", "@every 10m", "@every 1h30m")`, text, strings.TrimSpace(rest))
		}
		if d < MinEvery {
			return Schedule{}, fmt.Errorf(`schedule %q: the interval must be at least %s`, text, MinEvery)
		}
		return Schedule{text: t, every: d}, nil
	}
	if strings.HasPrefix(t, "TZ=") || strings.HasPrefix(t, "CRON_TZ=") {
		return Schedule{}, fmt.Errorf(`schedule %q: time zones are not supported; cron fields are read in UTC`, text)
	}
	c, err := parser.Parse(t)
	if err != nil {
		return Schedule{}, fmt.Errorf(`schedule %q: %v; want "@every 1h", a descriptor (@hourly, @daily, @weekly, @monthly, @yearly), or five cron fields (minute hour day-of-month month day-of-week) such as "0 3 * * *"`, text, err)
	}
	return Schedule{text: t, cron: c}, nil
}

// String is the schedule as written (trimmed).
func (s Schedule) String() string { return s.text }

// Every is the interval of an "@every" schedule (zero for a cron one).
func (s Schedule) Every() time.Duration { return s.every }

// Next is the first time after t the schedule is due: t plus the
// interval for "@every", else the next minute the cron fields match (in
// UTC). The zero Schedule returns the zero time.
func (s Schedule) Next(t time.Time) time.Time {
	switch {
	case s.every > 0:
		return t.Add(s.every)
	case s.cron != nil:
		return s.cron.Next(t.UTC())
	}
	return time.Time{}
}

// Due reports whether a schedule whose last run started at last (zero:
// never ran) is due at now, with the time it became due. A schedule that
// never ran is first due at its first time after since (the job's
// creation or the watcher's start), so a new job does not run at once
// unless "@every" says so after one interval.
func (s Schedule) Due(last, since, now time.Time) (bool, time.Time) {
	from := last
	if from.IsZero() {
		from = since
	}
	next := s.Next(from)
	if next.IsZero() {
		return false, next
	}
	return !next.After(now), next
}
