package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
	_ "time/tzdata" // time zones work on hosts without a zoneinfo database

	"github.com/aapd/aapd/aap"
)

// Clock returns the "clock" tool: the current date and time, in UTC or in
// an IANA time zone. now is the clock to read (time.Now if nil).
func Clock(now func() time.Time) Func {
	if now == nil {
		now = time.Now
	}
	return Func{
		ToolSpec: aap.ToolSpec{
			Name:        "clock",
			Title:       "Clock",
			Description: "Returns the current date and time (RFC 3339), in UTC or in the given IANA time zone.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"timezone":{"type":"string",` +
				`"description":"IANA time zone, e.g. Europe/Paris; UTC if omitted"}}}`),
		},
		Fn: func(_ context.Context, input json.RawMessage) (aap.Content, error) {
			var in struct {
				Timezone string `json:"timezone"`
			}
			if err := decodeInput(input, &in); err != nil {
				return aap.Content{}, err
			}
			loc := time.UTC
			if in.Timezone != "" {
				var err error
				if loc, err = time.LoadLocation(in.Timezone); err != nil {
					return aap.Content{}, fmt.Errorf("unknown time zone %q", in.Timezone)
				}
			}
			t := now().In(loc)
			return aap.TextContent(fmt.Sprintf("%s (%s)", t.Format(time.RFC3339), t.Weekday())), nil
		},
	}
}
