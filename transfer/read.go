package transfer

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/auth"
	"github.com/aapd/aapd/store"
)

// Importer creates a session from a document's parts: *store.Store.
type Importer interface {
	SessionImport(ctx context.Context, p store.SessionImportParams, next func() (store.ImportPart, error)) (store.Session, error)
}

// ReadOptions say whose session an import creates and what it accepts.
type ReadOptions struct {
	TenantID string
	// Owner is the end user the session belongs to ("" for none), unless
	// OwnerFromDocument: then it is the one the document's header names
	// (an operator moving sessions).
	Owner             string
	OwnerFromDocument bool
	// KeepIDs keeps the session's and its turns' ids (an operator moving a
	// tenant, whose clients keep the ids they stored).
	KeepIDs bool
	// Sealed accepts a header's sealed secret values: an operator's
	// import only (a tenant could otherwise borrow another's).
	Sealed bool
	// Check, when set, refuses a session this server cannot run (its
	// agent, options or tools, as the header names them): it returns why.
	Check func(Session) error
	// MaxLine bounds a line's length (DefaultMaxLine when zero).
	MaxLine int
}

// DefaultMaxLine bounds a document's line: a message of an image or a long
// tool result fits; the reader holds one line at a time.
const DefaultMaxLine = 32 << 20

// Rules a document can break (LineError.Rule).
const (
	// RuleJSON: the line is not JSON of its type's shape (malformed, an
	// unknown member, a value of the wrong type).
	RuleJSON = "json"
	// RuleFormat: the document is not of this format, or of a version this
	// server does not read.
	RuleFormat = "format"
	// RuleOrder: a line out of order (a kind of line where it cannot be,
	// positions not following each other).
	RuleOrder = "order"
	// RuleReference: a reference that resolves to nothing (a turn, a
	// full-history position, a pending tool call).
	RuleReference = "reference"
	// RuleValue: a value out of its domain (a status, an origin, a message
	// that is not a history message).
	RuleValue = "value"
	// RuleTrailer: the trailer is missing, or its counts or checksum do not
	// match the lines before it, or something follows it.
	RuleTrailer = "trailer"
	// RuleSize: a line longer than the reader takes.
	RuleSize = "size"
)

// LineError is a document a reader refuses: the line (from 1) and the
// rule it breaks.
type LineError struct {
	Line int
	Rule string
	Msg  string
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %s: %s", e.Line, e.Rule, e.Msg) }

// ReadSession reads one session document from r and has dst import it, all
// or nothing: any line that breaks a rule is a *LineError, and nothing is
// written. A session document must end r.
func ReadSession(ctx context.Context, r io.Reader, dst Importer, opts ReadOptions) (store.Session, error) {
	lr := newLineReader(r, opts.MaxLine)
	line, err := lr.next()
	if errors.Is(err, io.EOF) {
		return store.Session{}, &LineError{Line: 1, Rule: RuleFormat, Msg: "the document is empty"}
	}
	if err != nil {
		return store.Session{}, err
	}
	return readSessionDoc(ctx, lr, line, dst, opts, true)
}

// lineReader reads a document line by line. Each line is fed to the
// hashes of the documents it is part of once the next line is asked for:
// when a trailer is read, the hashes hold exactly the lines before it.
type lineReader struct {
	r      *bufio.Reader
	max    int
	n      int    // lines read
	buf    []byte // the last line read, with its line break, not yet fed
	hashes []hash.Hash
	peeked bool
}

func newLineReader(r io.Reader, max int) *lineReader {
	if max <= 0 {
		max = DefaultMaxLine
	}
	return &lineReader{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// next returns the next line without its line break; io.EOF at the end.
// The line is valid until the next call.
func (lr *lineReader) next() ([]byte, error) {
	if lr.peeked {
		lr.peeked = false
		return lr.buf[:len(lr.buf)-1], nil
	}
	for _, h := range lr.hashes {
		h.Write(lr.buf)
	}
	lr.buf = lr.buf[:0]
	for {
		frag, err := lr.r.ReadSlice('\n')
		lr.buf = append(lr.buf, frag...)
		if len(lr.buf) > lr.max {
			return nil, &LineError{Line: lr.n + 1, Rule: RuleSize, Msg: fmt.Sprintf("the line is longer than %d bytes", lr.max)}
		}
		switch {
		case err == nil:
			lr.n++
			return lr.buf[:len(lr.buf)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(lr.buf) == 0:
			return nil, io.EOF
		case errors.Is(err, io.EOF):
			lr.buf = lr.buf[:0]
			return nil, &LineError{Line: lr.n + 1, Rule: RuleTrailer, Msg: "the document's last line has no line break: it was cut"}
		}
		lr.buf = lr.buf[:0]
		return nil, err
	}
}

// unread makes next return the line it returned last again.
func (lr *lineReader) unread() { lr.peeked = true }

// push makes h see the line last read and every line after it.
func (lr *lineReader) push(h hash.Hash) { lr.hashes = append(lr.hashes, h) }

// pop stops feeding the last hash pushed: the line last read is not fed
// to it.
func (lr *lineReader) pop() { lr.hashes = lr.hashes[:len(lr.hashes)-1] }

// errAt is a LineError at the line last read.
func (lr *lineReader) errAt(rule, format string, args ...any) *LineError {
	return &LineError{Line: lr.n, Rule: rule, Msg: fmt.Sprintf(format, args...)}
}

// decodeLine decodes a line into v, strictly: an unknown member is an
// error, and so is anything after the object.
func decodeLine(line []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one JSON value on the line")
	}
	return nil
}

// lineType returns a line's "type": read from the line's start when it is
// written as this package writes it, else from the whole line.
func lineType(line []byte) (string, error) {
	if rest, ok := bytes.CutPrefix(line, []byte(`{"type":"`)); ok {
		if i := bytes.IndexByte(rest, '"'); i > 0 && bytes.IndexByte(rest[:i], '\\') < 0 {
			return string(rest[:i]), nil
		}
	}
	var t struct {
		Type *string `json:"type"`
	}
	if err := json.Unmarshal(line, &t); err != nil {
		return "", fmt.Errorf("not a JSON object: %v", err)
	}
	if t.Type == nil {
		return "", errors.New(`no "type"`)
	}
	return *t.Type, nil
}

// readSessionDoc reads a session document whose header is line (the line
// last read) and imports it. alone says the document must end the input.
func readSessionDoc(ctx context.Context, lr *lineReader, line []byte, dst Importer, opts ReadOptions, alone bool) (store.Session, error) {
	h := sha256.New()
	lr.push(h)
	defer lr.pop()
	p, v, err := readHeader(lr, line, opts)
	if err != nil {
		return store.Session{}, err
	}
	v.hash, v.alone = h, alone
	return dst.SessionImport(ctx, p, v.next)
}

// readHeader checks a session document's header.
func readHeader(lr *lineReader, line []byte, opts ReadOptions) (store.SessionImportParams, *validator, error) {
	var p store.SessionImportParams
	typ, err := lineType(line)
	if err != nil {
		return p, nil, lr.errAt(RuleJSON, "%v", err)
	}
	if typ != typeHeader {
		return p, nil, lr.errAt(RuleFormat, "the document starts with a %q line, not a %s header", typ, SessionFormat)
	}
	var hd Header
	if err := decodeLine(line, &hd); err != nil {
		return p, nil, lr.errAt(RuleJSON, "%v", err)
	}
	switch {
	case hd.Format != SessionFormat:
		return p, nil, lr.errAt(RuleFormat, "format %q is not %q", hd.Format, SessionFormat)
	case hd.Version < 1 || hd.Version > SessionVersion:
		return p, nil, lr.errAt(RuleFormat, "version %d is unknown to this server, which reads versions 1 to %d", hd.Version, SessionVersion)
	}
	s := hd.Session
	if s.Agent.Name == "" {
		return p, nil, lr.errAt(RuleValue, "session.agent.name is required")
	}
	if opts.Check != nil {
		if err := opts.Check(s); err != nil {
			return p, nil, lr.errAt(RuleReference, "%v", err)
		}
	}
	if s.Messages < 0 {
		return p, nil, lr.errAt(RuleValue, "session.messages must be 0 or more")
	}
	switch {
	case s.TrimmedThrough != 0 && hd.Version < 3:
		return p, nil, lr.errAt(RuleFormat, "session.trimmedThrough needs version 3 of the format; the header says %d", hd.Version)
	case s.TrimmedThrough < 0 || s.TrimmedThrough > s.Messages:
		return p, nil, lr.errAt(RuleValue, "session.trimmedThrough must be from 0 to session.messages (%d)", s.Messages)
	}
	for name, v := range s.Agent.Secrets {
		if v != SecretSet && v != SecretUnset {
			return p, nil, lr.errAt(RuleValue, "session.agent.secrets.%s is %q, not %q or %q", name, v, SecretSet, SecretUnset)
		}
	}
	out := store.ExportedSession{Messages: s.Messages}
	out.HistoryTrimmedThrough = s.TrimmedThrough
	out.AgentName, out.AgentTools, out.Options, out.ClientTools, out.CreatedAt =
		s.Agent.Name, s.Agent.Tools, s.Agent.Options, s.Tools, s.CreatedAt
	if s.ForkedFrom != nil {
		out.ForkedFrom = &store.ForkOrigin{SessionID: s.ForkedFrom.SessionID, Messages: s.ForkedFrom.At.Message}
	}
	if s.SealedSecrets != "" {
		if !opts.Sealed {
			return p, nil, lr.errAt(RuleValue, "session.sealedSecrets are taken only by an operator's import (aapd sessions import): remove them, and set secret options again with a turn")
		}
		if out.Sealed, err = base64.StdEncoding.DecodeString(s.SealedSecrets); err != nil {
			return p, nil, lr.errAt(RuleValue, "session.sealedSecrets is not base64: %v", err)
		}
	}
	pending := map[string]bool{}
	for i, c := range s.Pending {
		if c.ToolCallID == "" || c.Name == "" {
			return p, nil, lr.errAt(RuleValue, "session.pending[%d] needs a toolCallId and a name", i)
		}
		if c.Awaiting != AwaitingResult && c.Awaiting != AwaitingPermission {
			return p, nil, lr.errAt(RuleValue, "session.pending[%d].awaiting is %q, not %q or %q", i, c.Awaiting, AwaitingResult, AwaitingPermission)
		}
		if pending[c.ToolCallID] {
			return p, nil, lr.errAt(RuleValue, "session.pending[%d]: tool call %q is pending twice", i, c.ToolCallID)
		}
		pending[c.ToolCallID] = true
		out.Pending = append(out.Pending, aap.PendingToolCall{ToolCall: aap.ToolCall{ToolCallID: c.ToolCallID, Name: c.Name, Input: c.Input},
			Server: c.Awaiting == AwaitingPermission, Granted: c.Granted})
	}
	owner := opts.Owner
	if opts.OwnerFromDocument {
		owner = s.Owner
		if owner != "" && !auth.ValidOwner(owner) {
			return p, nil, lr.errAt(RuleValue, "session.owner is not an end user's subject (1 to 255 bytes, no control characters)")
		}
	}
	out.ID = s.ID
	p = store.SessionImportParams{TenantID: opts.TenantID, Owner: owner, Session: out, KeepIDs: opts.KeepIDs}
	return p, &validator{lr: lr, header: s, version: hd.Version, pending: pending, open: map[string]bool{}}, nil
}

// validator checks a session document's lines after its header, as they
// are read, and turns them into the store's parts.
type validator struct {
	lr      *lineReader
	header  Session
	version int
	hash    hash.Hash
	alone   bool

	section int // sectionHistory, sectionCompactions, sectionCompacted, sectionDone
	counts  Counts
	turn    string // the document's id of the last turn
	// open are the tool calls of the last assistant message not answered
	// since; pending the header's pending calls.
	open, pending map[string]bool
	// compaction is true once a compaction line was read; partEnd is the
	// last compacted position of the parts read so far in this section.
	compaction bool
	partEnd    int64
}

const (
	sectionHistory = iota
	sectionCompactions
	sectionCompacted
	sectionSchedules
	sectionDone
)

// next is the store's source of parts: it reads, checks and converts the
// next line; io.EOF once the trailer was read and checked. A message
// part's Message and Extra are the line's own bytes: they are valid until
// next is called again (the store writes them before it asks for more).
func (v *validator) next() (store.ImportPart, error) {
	if v.section == sectionDone {
		return store.ImportPart{}, io.EOF
	}
	line, err := v.lr.next()
	if errors.Is(err, io.EOF) {
		return store.ImportPart{}, &LineError{Line: v.lr.n + 1, Rule: RuleTrailer, Msg: "the document ends without its trailer: it was cut"}
	}
	if err != nil {
		return store.ImportPart{}, err
	}
	typ, err := lineType(line)
	if err != nil {
		return store.ImportPart{}, v.lr.errAt(RuleJSON, "%v", err)
	}
	switch typ {
	case typeTurn, typeMessage:
		if v.section != sectionHistory {
			return store.ImportPart{}, v.outOfOrder(typ)
		}
		if typ == typeTurn {
			return v.turnLine(line)
		}
		return v.messageLine(line)
	case typeCompaction, typeReplaced:
		if v.section > sectionCompactions {
			return store.ImportPart{}, v.outOfOrder(typ)
		}
		v.enter(sectionCompactions)
		if typ == typeCompaction {
			return v.compactionLine(line)
		}
		return v.partLine(line, typeReplaced)
	case typeCompacted:
		if v.section > sectionCompacted {
			return store.ImportPart{}, v.outOfOrder(typ)
		}
		v.enter(sectionCompacted)
		return v.partLine(line, typeCompacted)
	case typeSchedule:
		if v.version < 2 {
			return store.ImportPart{}, v.lr.errAt(RuleFormat, "a %q line needs version 2 of the format; the header says %d", typ, v.version)
		}
		v.enter(sectionSchedules)
		return v.scheduleLine(line)
	case typeTrailer:
		if err := v.trailer(line); err != nil {
			return store.ImportPart{}, err
		}
		return store.ImportPart{}, io.EOF
	case typeHeader, typeTenant, typeTenantTrailer:
		return store.ImportPart{}, v.outOfOrder(typ)
	}
	return store.ImportPart{}, v.lr.errAt(RuleJSON, "unknown line type %q", typ)
}

// enter moves on to a later section.
func (v *validator) enter(section int) {
	if v.section < section {
		v.section, v.partEnd = section, 0
	}
}

func (v *validator) outOfOrder(typ string) *LineError {
	where := [...]string{"among the turns and messages", "among the compactions", "in the compacted history", "among the schedules", "after the trailer"}[v.section]
	return v.lr.errAt(RuleOrder, "a %q line cannot come %s: the order is header, turns and messages, compactions each with what it replaced, the compacted history, schedules, trailer", typ, where)
}

func (v *validator) turnLine(line []byte) (store.ImportPart, error) {
	var t TurnLine
	if err := decodeLine(line, &t); err != nil {
		return store.ImportPart{}, v.lr.errAt(RuleJSON, "%v", err)
	}
	switch {
	case t.ID == "" || len(t.ID) > 255:
		return store.ImportPart{}, v.lr.errAt(RuleValue, "a turn needs an id of 1 to 255 bytes")
	case t.ID == v.turn:
		return store.ImportPart{}, v.lr.errAt(RuleOrder, "turn %s appears twice", t.ID)
	case !oneOf(t.Status, string(store.TurnCompleted), string(store.TurnFailed), string(store.TurnInterrupted), string(store.TurnCancelled)):
		return store.ImportPart{}, v.lr.errAt(RuleValue, "turn status %q is not completed, failed, interrupted or cancelled", t.Status)
	case !oneOf(t.Stream, string(aap.StreamNone), string(aap.StreamDelta), string(aap.StreamMessage)):
		return store.ImportPart{}, v.lr.errAt(RuleValue, "turn stream %q is not none, delta or message", t.Stream)
	case t.StopReason != "" && !oneOf(t.StopReason, string(aap.StopEndTurn), string(aap.StopToolUse), string(aap.StopMaxTokens),
		string(aap.StopRefusal), string(aap.StopError)):
		return store.ImportPart{}, v.lr.errAt(RuleValue, "turn stopReason %q is not one of AAP's", t.StopReason)
	case t.Usage.InputTokens < 0 || t.Usage.OutputTokens < 0:
		return store.ImportPart{}, v.lr.errAt(RuleValue, "turn usage cannot be negative")
	case t.CreatedAt.IsZero():
		return store.ImportPart{}, v.lr.errAt(RuleValue, "a turn needs its createdAt")
	}
	v.turn = t.ID
	v.counts.Turns++
	out := &store.Turn{ID: t.ID, Status: store.TurnStatus(t.Status), Stream: aap.StreamMode(t.Stream), StopReason: aap.StopReason(t.StopReason),
		InputTokens: t.Usage.InputTokens, OutputTokens: t.Usage.OutputTokens, CreatedAt: t.CreatedAt, FinishedAt: t.FinishedAt}
	if t.Error != nil {
		out.ErrorType, out.Error = t.Error.Type, t.Error.Message
	}
	return store.ImportPart{Turn: out}, nil
}

// last is the position of the last full-history message read so far: the
// trimmed prefix and the messages after it.
func (v *validator) last() int64 { return v.header.TrimmedThrough + v.counts.Messages }

func (v *validator) messageLine(line []byte) (store.ImportPart, error) {
	m, text, err := parseMessageLine(line)
	if err != nil {
		return store.ImportPart{}, v.lr.errAt(RuleJSON, "%v", err)
	}
	switch {
	case m.Position != v.last()+1:
		return store.ImportPart{}, v.lr.errAt(RuleOrder, "message at position %d where position %d comes next", m.Position, v.last()+1)
	case m.Turn != nil && *m.Turn != v.turn:
		return store.ImportPart{}, v.lr.errAt(RuleReference, "message %d names turn %q, which is not the turn line before it", m.Position, *m.Turn)
	case !oneOf(m.Origin, string(store.OriginClient), string(store.OriginAgent), string(store.OriginServer)):
		return store.ImportPart{}, v.lr.errAt(RuleValue, "message origin %q is not client, agent or server", m.Origin)
	case m.Time.IsZero():
		return store.ImportPart{}, v.lr.errAt(RuleValue, "message %d needs its time", m.Position)
	}
	msg, ok := plainMessage(text)
	if !ok {
		if msg, err = historyMessage(m.Message); err != nil {
			return store.ImportPart{}, v.lr.errAt(RuleValue, "message %d: %v", m.Position, err)
		}
	}
	v.track(msg)
	v.counts.Messages++
	out := &store.ExportedMessage{Seq: m.Position, Origin: store.Origin(m.Origin), CreatedAt: m.Time, Message: m.Message, Extra: m.Extra}
	if m.Turn != nil {
		out.TurnID = *m.Turn
	}
	return store.ImportPart{Message: out}, nil
}

// parseMessageLine decodes a message line as strictly as decodeLine does
// (an unknown member, a value of the wrong type, anything after the object
// are errors) in one quick pass over the line (gjson): message lines are
// most of a document, and the message itself is decoded once more, by its
// own rules (historyMessage).
func parseMessageLine(line []byte) (m MessageLine, text string, err error) {
	if !gjson.ValidBytes(line) || !utf8.Valid(line) {
		return m, "", errors.New("not a JSON value in UTF-8")
	}
	root := gjson.ParseBytes(line)
	if !root.IsObject() {
		return m, "", errors.New("not a JSON object")
	}
	bad := func(k gjson.Result, want string, val gjson.Result) {
		err = fmt.Errorf("message line: %s must be %s, not %s", k.Str, want, val.Raw)
	}
	root.ForEach(func(k, val gjson.Result) bool {
		switch k.Str {
		case "type":
			m.Type = val.Str
		case "position":
			if val.Type != gjson.Number || !wholeNumber(val.Raw) {
				bad(k, "a whole number", val)
			}
			m.Position = val.Int()
		case "turn":
			switch val.Type {
			case gjson.Null:
			case gjson.String:
				t := val.Str
				m.Turn = &t
			default:
				bad(k, "a string or null", val)
			}
		case "origin":
			if val.Type != gjson.String {
				bad(k, "a string", val)
			}
			m.Origin = val.Str
		case "time":
			if val.Type != gjson.String {
				bad(k, "a string", val)
			} else if m.Time, err = time.Parse(time.RFC3339Nano, val.Str); err != nil {
				err = fmt.Errorf("message line: time: %v", err)
			}
		case "message":
			m.Message, text = rawOf(line, val), val.Raw
		case "extra":
			if val.Type != gjson.Null {
				m.Extra = rawOf(line, val)
			}
		default:
			err = fmt.Errorf("json: unknown field %q", k.Str)
		}
		return err == nil
	})
	return m, text, err
}

// wholeNumber reports whether a JSON number is written as a whole number.
func wholeNumber(raw string) bool {
	raw = strings.TrimPrefix(raw, "-")
	if raw == "" || len(raw) > 18 {
		return false
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] < '0' || raw[i] > '9' {
			return false
		}
	}
	return true
}

// rawOf returns a value's JSON as it is in the line, without a copy: it is
// valid while the line is (until the reader's next line).
func rawOf(line []byte, v gjson.Result) json.RawMessage {
	if v.Index > 0 && v.Index+len(v.Raw) <= len(line) {
		return line[v.Index : v.Index+len(v.Raw)]
	}
	return json.RawMessage(v.Raw)
}

// historyMessage checks a message of a history: any AAP message but a
// tool permission, which histories never hold. A message whose content is
// a string (most are) is checked first, in one quick pass (plainMessage).
func historyMessage(raw json.RawMessage) (aap.Message, error) {
	var msg aap.Message
	if len(raw) == 0 {
		return msg, errors.New("no message")
	}
	if m, ok := plainMessage(string(raw)); ok {
		return m, nil
	}
	if err := json.Unmarshal(raw, &msg); err != nil {
		return msg, err
	}
	if msg.Role == aap.RoleToolPermission {
		return msg, errors.New(`a "tool_permission" message is never part of a history`)
	}
	return msg, nil
}

// plainMessage reads a message that is plainly valid, as AAP takes any
// string as content: a system, user or assistant message of string
// content, or a tool result of string content with its call's id, and
// nothing else. Its content is not kept: only its role and call id are
// needed of it (track). Any other message is decoded by AAP's rules.
func plainMessage(text string) (aap.Message, bool) {
	var m aap.Message
	ok, content := true, false
	gjson.Parse(text).ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "role":
			m.Role = aap.Role(v.Str)
			ok = v.Type == gjson.String
		case "content":
			ok, content = v.Type == gjson.String, true
		case "toolCallId":
			m.ToolCallID = v.Str
			ok = v.Type == gjson.String && v.Str != ""
		default:
			ok = false
		}
		return ok
	})
	switch m.Role {
	case aap.RoleSystem, aap.RoleUser, aap.RoleAssistant:
		return m, ok && content && m.ToolCallID == ""
	case aap.RoleTool:
		return m, ok && content && m.ToolCallID != ""
	}
	return m, false
}

// track follows the tool calls left open by the last assistant message.
func (v *validator) track(m aap.Message) {
	switch m.Role {
	case aap.RoleAssistant:
		clear(v.open)
		for _, c := range m.ToolCalls() {
			v.open[c.ToolCallID] = true
		}
	case aap.RoleTool:
		delete(v.open, m.ToolCallID)
	}
}

func (v *validator) compactionLine(line []byte) (store.ImportPart, error) {
	var c CompactionLine
	if err := decodeLine(line, &c); err != nil {
		return store.ImportPart{}, v.lr.errAt(RuleJSON, "%v", err)
	}
	switch {
	case !oneOf(c.Trigger, "auto", "manual"):
		return store.ImportPart{}, v.lr.errAt(RuleValue, "compaction trigger %q is not auto or manual", c.Trigger)
	case c.Strategy == "":
		return store.ImportPart{}, v.lr.errAt(RuleValue, "a compaction needs its strategy")
	case c.From < 0 || c.To < c.From:
		return store.ImportPart{}, v.lr.errAt(RuleValue, "compaction range %d to %d is not a range", c.From, c.To)
	case c.To > v.last():
		return store.ImportPart{}, v.lr.errAt(RuleReference, "compaction range ends at position %d, after the %d messages", c.To, v.last())
	case c.MessagesBefore < 0 || c.MessagesAfter < 0 || c.TokensBefore < 0 || c.TokensAfter < 0:
		return store.ImportPart{}, v.lr.errAt(RuleValue, "compaction counts cannot be negative")
	case c.Time.IsZero():
		return store.ImportPart{}, v.lr.errAt(RuleValue, "a compaction needs its time")
	}
	v.compaction, v.partEnd = true, 0
	v.counts.Compactions++
	return store.ImportPart{Compaction: &store.Compaction{CreatedAt: c.Time, Trigger: c.Trigger, Strategy: c.Strategy,
		FromSeq: c.From, ToSeq: c.To, MessagesBefore: c.MessagesBefore, MessagesAfter: c.MessagesAfter,
		TokensBefore: c.TokensBefore, TokensAfter: c.TokensAfter}}, nil
}

// partLine checks a part of a compacted history (or of what a compaction
// replaced): its positions follow the part before, and its copies are of
// messages the document holds.
func (v *validator) partLine(line []byte, typ string) (store.ImportPart, error) {
	var p PartLine
	if err := decodeLine(line, &p); err != nil {
		return store.ImportPart{}, v.lr.errAt(RuleJSON, "%v", err)
	}
	if typ == typeReplaced && !v.compaction {
		return store.ImportPart{}, v.lr.errAt(RuleOrder, `a "replaced" line comes after the compaction that replaced it`)
	}
	if p.Position <= v.partEnd {
		return store.ImportPart{}, v.lr.errAt(RuleOrder, "%s position %d does not follow position %d", typ, p.Position, v.partEnd)
	}
	part := store.CompactedPart{Seq: p.Position}
	switch {
	case p.Copies != nil && len(p.Message) > 0, p.Copies == nil && len(p.Message) == 0:
		return store.ImportPart{}, v.lr.errAt(RuleValue, `a %q line has either "copies" or a "message"`, typ)
	case p.Copies != nil:
		c := *p.Copies
		if c.From < 1 || c.To < c.From {
			return store.ImportPart{}, v.lr.errAt(RuleValue, "copies from %d to %d is not a range of positions", c.From, c.To)
		}
		if c.To > v.last() {
			return store.ImportPart{}, v.lr.errAt(RuleReference, "copies of positions up to %d, after the %d messages", c.To, v.last())
		}
		if c.From <= v.header.TrimmedThrough {
			return store.ImportPart{}, v.lr.errAt(RuleReference, "copies of position %d, which session.trimmedThrough (%d) says was dropped", c.From, v.header.TrimmedThrough)
		}
		if len(p.Extra) > 0 {
			return store.ImportPart{}, v.lr.errAt(RuleValue, "copies carry their messages' extra: a %q line of copies has none of its own", typ)
		}
		part.Copies, part.SourceSeq = c.To-c.From+1, c.From
	default:
		if _, err := historyMessage(p.Message); err != nil {
			return store.ImportPart{}, v.lr.errAt(RuleValue, "%s position %d: %v", typ, p.Position, err)
		}
		if len(p.Extra) > 0 && !json.Valid(p.Extra) {
			return store.ImportPart{}, v.lr.errAt(RuleJSON, "extra is not JSON")
		}
		part.Message, part.Extra = p.Message, p.Extra
	}
	end := p.Position + max(part.Copies, 1) - 1
	if typ == typeCompacted && end > v.last() {
		return store.ImportPart{}, v.lr.errAt(RuleReference, "compacted position %d is after the %d messages", end, v.last())
	}
	v.partEnd = end
	if typ == typeReplaced {
		v.counts.Replaced++
		return store.ImportPart{Replaced: &part}, nil
	}
	v.counts.Compacted++
	return store.ImportPart{Compacted: &part}, nil
}

// trailer checks the trailer against the lines before it, the header's
// message count and pending calls, and, for a document alone, that nothing
// follows.
func (v *validator) trailer(line []byte) error {
	sum := v.hash.Sum(nil) // the lines before the trailer (lineReader)
	var t Trailer
	if err := decodeLine(line, &t); err != nil {
		return v.lr.errAt(RuleJSON, "%v", err)
	}
	switch {
	case !sameSet(v.pending, v.open):
		return &LineError{Line: 1, Rule: RuleReference, Msg: fmt.Sprintf(
			"session.pending names the calls %s, but the calls left open by the history's last assistant message are %s",
			setList(v.pending), setList(v.open))}
	case t.Counts != v.counts:
		return v.lr.errAt(RuleTrailer, "the trailer counts %+v, the document holds %+v", t.Counts, v.counts)
	case v.header.Messages != v.last():
		return v.lr.errAt(RuleTrailer, "the header says %d messages, the document holds %d", v.header.Messages, v.last())
	case !strings.EqualFold(t.SHA256, hex.EncodeToString(sum)):
		return v.lr.errAt(RuleTrailer, "the SHA-256 of the lines before the trailer is %s, not %s: the document was changed", hex.EncodeToString(sum), t.SHA256)
	}
	if v.alone {
		if _, err := v.lr.next(); !errors.Is(err, io.EOF) {
			if err != nil {
				return err
			}
			return v.lr.errAt(RuleTrailer, "a line after the trailer")
		}
	}
	v.section = sectionDone
	return nil
}

func oneOf(s string, list ...string) bool {
	for _, v := range list {
		if s == v {
			return true
		}
	}
	return false
}

func sameSet(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

func setList(m map[string]bool) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, fmt.Sprintf("%q", k))
	}
	sort.Strings(keys)
	return strings.Join(keys, ", ")
}
