package schedule

import (
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 3, 14, 10, 20, 30, 0, time.UTC)

func TestParse_AcceptsEveryDescriptorsAndCronFields(t *testing.T) {
	for _, tc := range []struct {
		text string
		next time.Time
	}{
		{"@every 4s", t0.Add(4 * time.Second)},
		{" @every 1h30m ", t0.Add(90 * time.Minute)},
		{"@hourly", time.Date(2026, 3, 14, 11, 0, 0, 0, time.UTC)},
		{"@daily", time.Date(2026, 3, 15, 0, 0, 0, 0, time.UTC)},
		{"0 3 * * *", time.Date(2026, 3, 15, 3, 0, 0, 0, time.UTC)},
		{"*/15 * * * *", time.Date(2026, 3, 14, 10, 30, 0, 0, time.UTC)},
		{"30 10 * * 1-5", time.Date(2026, 3, 16, 10, 30, 0, 0, time.UTC)}, // t0 is a Saturday
	} {
		s, err := Parse(tc.text)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.text, err)
			continue
		}
		if got := s.Next(t0); !got.Equal(tc.next) {
			t.Errorf("Parse(%q).Next(%s) = %s, want %s", tc.text, t0, got, tc.next)
		}
	}
}

func TestParse_CronFieldsAreReadInUTC(t *testing.T) {
	s, err := Parse("0 3 * * *")
	if err != nil {
		t.Fatal(err)
	}
	paris := time.FixedZone("UTC+1", 3600)
	got := s.Next(time.Date(2026, 3, 14, 3, 30, 0, 0, paris)) // 02:30 UTC
	if want := time.Date(2026, 3, 14, 3, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Fatalf("Next = %s, want %s", got, want)
	}
}

func TestParse_RefusesWhatIsNotASchedule_SayingWhatOneLooksLike(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"", "want \"@every 1h\""},
		{"@every soon", "is not a duration"},
		{"@every 100ms", "at least 1s"},
		{"0 3 * *", "five cron fields"},
		{"0 25 * * *", "five cron fields"},
		{"* * * * * *", "five cron fields"},
		{"@fortnightly", "five cron fields"},
		{"CRON_TZ=Europe/Paris 0 3 * * *", "read in UTC"},
	} {
		_, err := Parse(tc.text)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", tc.text, err, tc.want)
		}
	}
}

func TestDue_NeverRunIsDueOneIntervalAfterSince_ThenAfterEachRun(t *testing.T) {
	s, _ := Parse("@every 1h")
	if due, next := s.Due(time.Time{}, t0, t0.Add(59*time.Minute)); due || !next.Equal(t0.Add(time.Hour)) {
		t.Fatalf("before its first time: due=%v next=%s", due, next)
	}
	if due, _ := s.Due(time.Time{}, t0, t0.Add(time.Hour)); !due {
		t.Fatal("not due at its first time")
	}
	last := t0.Add(time.Hour)
	if due, next := s.Due(last, t0, last.Add(30*time.Minute)); due || !next.Equal(last.Add(time.Hour)) {
		t.Fatalf("30m after a run: due=%v next=%s", due, next)
	}
}

func TestDue_MissedTimesRunOnce(t *testing.T) {
	s, _ := Parse("0 3 * * *")
	last := time.Date(2026, 3, 10, 3, 0, 0, 0, time.UTC)
	now := time.Date(2026, 3, 14, 12, 0, 0, 0, time.UTC) // four 03:00 missed
	due, next := s.Due(last, time.Time{}, now)
	if !due || !next.Equal(time.Date(2026, 3, 11, 3, 0, 0, 0, time.UTC)) {
		t.Fatalf("due=%v next=%s", due, next)
	}
	// After that one run (at now), the next is tomorrow's 03:00.
	if due, next := s.Due(now, time.Time{}, now); due || !next.Equal(time.Date(2026, 3, 15, 3, 0, 0, 0, time.UTC)) {
		t.Fatalf("after the catch-up run: due=%v next=%s", due, next)
	}
}
