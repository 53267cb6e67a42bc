package transfer

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"strconv"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/store"
)

// Exporter reads a session for a document: *store.Store.
type Exporter interface {
	SessionExport(ctx context.Context, p store.SessionExportParams, w store.SessionWriter) error
}

// WriteOptions say what a session document carries beyond the session.
type WriteOptions struct {
	// DeclaredSecrets, when set, returns the secret options an agent
	// declares: those the session has not set are listed as unset.
	DeclaredSecrets func(agent string) []string
	// Sealed carries the secret option values sealed with the server's
	// key (Session.SealedSecrets): for an operator's export only.
	Sealed bool
}

// WriteSession writes one session's document to out, as the store streams
// it, and returns its counts. Nothing is written when the session cannot be
// read (not found, a tool call open before a running turn): the error says
// why. Once the header is written, a failure leaves a document without its
// trailer, which every reader refuses.
func WriteSession(ctx context.Context, out io.Writer, src Exporter, p store.SessionExportParams, opts WriteOptions) (Counts, error) {
	w := &sessionWriter{out: out, opts: opts, hash: sha256.New()}
	if err := src.SessionExport(ctx, p, w); err != nil {
		return w.counts, err
	}
	if w.bw == nil {
		return w.counts, fmt.Errorf("export session %s: no header was written", p.SessionID)
	}
	if err := w.trailer(); err != nil {
		return w.counts, err
	}
	return w.counts, w.bw.Flush()
}

// sessionWriter is a store.SessionWriter that writes a document's lines,
// hashing each.
type sessionWriter struct {
	out    io.Writer
	bw     *bufio.Writer
	opts   WriteOptions
	hash   hash.Hash
	counts Counts
	buf    []byte
	// schedules are written last, before the trailer.
	schedules []store.Schedule
	// part is the type of the parts being written (replaced, compacted).
}

// line writes one line (b ends with '\n').
func (w *sessionWriter) line(b []byte) error {
	w.hash.Write(b)
	_, err := w.bw.Write(b)
	return err
}

// object writes v as a line.
func (w *sessionWriter) object(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return w.line(append(b, '\n'))
}

func (w *sessionWriter) Session(s store.ExportedSession) error {
	w.bw = bufio.NewWriterSize(w.out, 64<<10)
	w.schedules = s.Schedules
	version := 1 // what every reader takes, unless the document needs more
	if len(s.Schedules) > 0 {
		version = 2
	}
	if s.HistoryTrimmedThrough > 0 {
		version = 3
	}
	h := Header{Type: typeHeader, Format: SessionFormat, Version: version, Session: Session{
		ID: s.ID, Owner: s.Owner, CreatedAt: s.CreatedAt.UTC(), Tools: s.ClientTools, Messages: s.Messages, LeftOutTurn: s.LeftOut,
		Agent: Agent{Name: s.AgentName, Tools: s.AgentTools, Options: s.Options},
	}}
	if len(h.Session.Agent.Options) == 0 {
		h.Session.Agent.Options = nil
	}
	h.Session.TrimmedThrough = s.HistoryTrimmedThrough
	if s.ForkedFrom != nil {
		h.Session.ForkedFrom = &ForkedFrom{SessionID: s.ForkedFrom.SessionID, At: ForkAt{Message: s.ForkedFrom.Messages}}
	}
	secrets := map[string]string{}
	if w.opts.DeclaredSecrets != nil {
		for _, name := range w.opts.DeclaredSecrets(s.AgentName) {
			secrets[name] = SecretUnset
		}
	}
	for name, v := range s.SecretOptions {
		if v != "" {
			secrets[name] = SecretSet
		} else {
			secrets[name] = SecretUnset
		}
	}
	if len(secrets) > 0 {
		h.Session.Agent.Secrets = secrets
	}
	if w.opts.Sealed && len(s.Sealed) > 0 {
		h.Session.SealedSecrets = base64.StdEncoding.EncodeToString(s.Sealed)
	}
	for _, p := range s.Pending {
		line := Pending{ToolCallID: p.ToolCallID, Name: p.Name, Input: p.Input, Awaiting: AwaitingResult, Granted: p.Granted}
		if len(line.Input) == 0 || string(line.Input) == "null" {
			line.Input = json.RawMessage(`{}`)
		}
		if p.Server {
			line.Awaiting = AwaitingPermission
		}
		h.Session.Pending = append(h.Session.Pending, line)
	}
	return w.object(h)
}

func (w *sessionWriter) Turn(t store.Turn) error {
	w.counts.Turns++
	line := TurnLine{Type: typeTurn, ID: t.ID, Status: string(t.Status), Stream: string(t.Stream), StopReason: string(t.StopReason),
		Usage: Usage{InputTokens: t.InputTokens, OutputTokens: t.OutputTokens}, CreatedAt: t.CreatedAt.UTC()}
	if t.Stream == "" {
		line.Stream = string(aap.StreamNone)
	}
	if t.Error != "" || t.ErrorType != "" {
		line.Error = &aap.TurnError{Type: t.ErrorType, Message: t.Error}
	}
	if t.FinishedAt != nil {
		f := t.FinishedAt.UTC()
		line.FinishedAt = &f
	}
	return w.object(line)
}

// Message writes a message's line by hand: it is most of a document, and
// its message is copied as stored, never decoded.
func (w *sessionWriter) Message(m store.ExportedMessage) error {
	w.counts.Messages++
	b := append(w.buf[:0], `{"type":"message","position":`...)
	b = strconv.AppendInt(b, m.Seq, 10)
	b = append(b, `,"turn":`...)
	if m.TurnID == "" {
		b = append(b, "null"...)
	} else {
		b = appendString(b, m.TurnID)
	}
	b = append(b, `,"origin":`...)
	b = appendString(b, string(m.Origin))
	b = append(b, `,"time":"`...)
	b = m.CreatedAt.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","message":`...)
	b = appendRaw(b, m.Message)
	if len(m.Extra) > 0 {
		b = append(b, `,"extra":`...)
		b = appendRaw(b, m.Extra)
	}
	b = append(b, "}\n"...)
	w.buf = b
	return w.line(b)
}

func (w *sessionWriter) Compaction(c store.Compaction) error {
	w.counts.Compactions++
	return w.object(CompactionLine{Type: typeCompaction, Time: c.CreatedAt.UTC(), Trigger: c.Trigger, Strategy: c.Strategy,
		From: c.FromSeq, To: c.ToSeq, MessagesBefore: c.MessagesBefore, MessagesAfter: c.MessagesAfter,
		TokensBefore: c.TokensBefore, TokensAfter: c.TokensAfter})
}

func (w *sessionWriter) Replaced(p store.CompactedPart) error {
	w.counts.Replaced++
	return w.object(partLine(typeReplaced, p))
}

func (w *sessionWriter) Compacted(p store.CompactedPart) error {
	w.counts.Compacted++
	return w.object(partLine(typeCompacted, p))
}

func partLine(typ string, p store.CompactedPart) PartLine {
	line := PartLine{Type: typ, Position: p.Seq}
	if p.Copies > 0 {
		line.Copies = &Range{From: p.SourceSeq, To: p.SourceSeq + p.Copies - 1}
	} else {
		line.Message, line.Extra = compactRaw(p.Message), compactRaw(p.Extra)
	}
	return line
}

// schedule writes a schedule's line.
func (w *sessionWriter) schedule(sc store.Schedule) error {
	w.counts.Schedules++
	messages, err := json.Marshal(sc.Request.Messages)
	if err != nil {
		return err
	}
	line := ScheduleLine{Type: typeSchedule, ID: sc.ID, Cron: sc.Cron, Timezone: sc.Timezone, Messages: messages,
		Stream: string(sc.Request.Stream), EndAt: utc(sc.EndAt), CreatedAt: sc.CreatedAt.UTC(), NextRunAt: utc(sc.NextRunAt),
		LastRunAt: utc(sc.LastRunAt), LastTurn: sc.LastTurnID, Runs: sc.Runs, SkippedRunning: sc.SkippedRunning,
		SkippedMissed: sc.SkippedMissed, SkippedRefused: sc.SkippedRefused, LastError: sc.LastError}
	if sc.Every != 0 {
		line.Every = sc.Every.String()
	}
	return w.object(line)
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

func (w *sessionWriter) trailer() error {
	for _, sc := range w.schedules {
		if err := w.schedule(sc); err != nil {
			return err
		}
	}
	t := Trailer{Type: typeTrailer, Counts: w.counts, SHA256: hex.EncodeToString(w.hash.Sum(nil))}
	b, err := json.Marshal(t)
	if err != nil {
		return err
	}
	_, err = w.bw.Write(append(b, '\n'))
	return err
}

// appendString appends s as a JSON string.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendRaw appends stored JSON, on one line: stored messages never hold
// a raw line break, but one written by hand into the database could.
func appendRaw(b []byte, raw []byte) []byte {
	if bytes.IndexByte(raw, '\n') < 0 && bytes.IndexByte(raw, '\r') < 0 {
		return append(b, raw...)
	}
	var c bytes.Buffer
	if json.Compact(&c, raw) != nil {
		return append(b, raw...) // not JSON: the database never holds that
	}
	return append(b, c.Bytes()...)
}

func compactRaw(raw []byte) json.RawMessage {
	if len(raw) == 0 {
		return nil
	}
	return appendRaw(nil, raw)
}
