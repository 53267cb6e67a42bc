package tools_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aapd/aapd/agents/tools"
)

func TestCalculator(t *testing.T) {
	cases := []struct {
		expr, want, err string
	}{
		{"2+3*4", "14", ""},
		{"(2+3)*4", "20", ""},
		{"2^3^2", "512", ""},
		{"-2^2", "-4", ""},
		{"10 % 4", "2", ""},
		{"sqrt(16) + .5", "4.5", ""},
		{"7/2", "3.5", ""},
		{"1/0", "", "division by zero"},
		{"2*(3", "", "missing ')'"},
		{"2 +", "", "unexpected end"},
		{"abc", "", "unexpected"},
		{"sqrt(-1)", "", "negative"},
		{"", "", "empty"},
		{strings.Repeat("(", 300) + "1" + strings.Repeat(")", 300), "", "nested too deeply"},
		{"1e400", "", "unexpected 'e'"},
		{"2^-1", "0.5", ""},
		{"--3", "3", ""},
	}
	calc := tools.Calculator()
	for _, tc := range cases {
		got, err := calc.Call(context.Background(), []byte(`{"expression":`+quote(tc.expr)+`}`))
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: err %v, want %q", tc.expr, err, tc.err)
		case tc.err == "" && (err != nil || got.Text != tc.want):
			t.Errorf("%q = %q, %v; want %s", tc.expr, got.Text, err, tc.want)
		}
	}
	if _, err := calc.Call(context.Background(), []byte(`{"expression":5}`)); err == nil || !strings.Contains(err.Error(), "invalid input") {
		t.Errorf("bad input: %v", err)
	}
}

func TestClock(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	clock := tools.Clock(func() time.Time { return now })
	got, err := clock.Call(context.Background(), []byte(`{"timezone":"Asia/Tokyo"}`))
	if err != nil || got.Text != "2026-11-22T21:00:00+09:00 (Sunday)" {
		t.Errorf("Tokyo: %q, %v", got.Text, err)
	}
	got, err = clock.Call(context.Background(), nil)
	if err != nil || got.Text != "2026-11-22T12:00:00Z (Sunday)" {
		t.Errorf("UTC: %q, %v", got.Text, err)
	}
	if _, err := clock.Call(context.Background(), []byte(`{"timezone":"Mars/Olympus"}`)); err == nil {
		t.Error("an unknown zone was accepted")
	}
}

func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` }
