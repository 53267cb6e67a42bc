package agents

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/compaction"
	"github.com/aapd/aapd/store"
)

// Compaction is how an agent keeps the history its model sees bounded.
type Compaction struct {
	Policy compaction.Policy
	// Summarizer writes the summaries of the summarize strategy; nil means
	// the agent's own model (see modelSummarizer).
	Summarizer compaction.Summarizer
}

// Compaction triggers, as recorded.
const (
	TriggerAuto   = "auto"
	TriggerManual = "manual"
)

// CompactOutcome is what a compaction did.
type CompactOutcome struct {
	// Changed is false when there was nothing to compact.
	Changed bool
	// Record is the stored record of the compaction, when Changed.
	Record store.Compaction
	// Tokens counts the compacted history when nothing changed.
	Tokens int
	// Reason says why nothing changed.
	Reason string
}

// compactAttempts bounds how often a compaction is recomputed when another
// replica's compaction of the same session won the race
// (store.ErrCompactionConflict): each attempt reads the history afresh, so
// a conflict means yet another compaction committed in between, which a
// well-behaved deployment does not keep doing.
const compactAttempts = 3

// CompactParams names the session to compact.
type CompactParams struct {
	TenantID  string
	SessionID string
	// Owner confines the compaction to a session of this end user ("" for
	// any): another's session is store.ErrNotFound.
	Owner string
}

// Compact compacts a session's history now (POST /sessions/:id/compact):
// down to the policy's target, even if the history is under its threshold.
// It fails with *store.TurnRunningError while a turn runs. A compaction of
// the session already under way in this process (another request's, or the
// automatic one after a turn) is waited for, so this one then finds its work
// done; it fails with store.ErrCompactionConflict only if other replicas
// kept compacting the session through every attempt.
func (r *Runner) Compact(ctx context.Context, p CompactParams) (CompactOutcome, error) {
	tenantID, sessionID := p.TenantID, p.SessionID
	unlock, err := r.lockCompaction(ctx, tenantID, sessionID)
	if err != nil {
		return CompactOutcome{}, err
	}
	defer unlock()
	sess, err := r.store.SessionGetOwned(ctx, tenantID, p.Owner, sessionID)
	if err != nil {
		return CompactOutcome{}, err
	}
	agent, ok := r.cfg.Agents.Get(sess.AgentName)
	if !ok {
		return CompactOutcome{}, fmt.Errorf("%w: %q", ErrUnknownAgent, sess.AgentName)
	}
	if sess.ActiveTurnID != "" {
		// A claim may be dead: CompactionApply decides; this only spares
		// the work while a turn is plainly running.
		if t, err := r.store.TurnGet(ctx, tenantID, sessionID, sess.ActiveTurnID); err == nil && t.Status == store.TurnRunning && r.liveStream(t.ID) != nil {
			return CompactOutcome{}, &store.TurnRunningError{TurnID: t.ID}
		}
	}
	return r.compactTraced(ctx, agent, sess, TriggerManual)
}

// compactionDue tells whether the history the turn left is over the
// agent's threshold. It judges from the turn's own view of the history,
// so a turn that needs no compaction costs no extra query.
func (r *Runner) compactionDue(run *turnRun) bool {
	c := run.agent.Compaction
	if c == nil {
		return false
	}
	items := make([]compaction.Item, len(run.history))
	for i, m := range run.history {
		items[i] = compaction.Item{Message: m.Message, Extra: m.Extra}
	}
	return compaction.Needed(compaction.History{Items: items, Usage: run.contextUsage()}, c.Policy)
}

// compactAfterTurn compacts a history compactionDue found over the
// threshold.
func (r *Runner) compactAfterTurn(ctx context.Context, run *turnRun) {
	out, err := r.compactAfterWaiting(ctx, run.agent, run.session)
	var running *store.TurnRunningError
	switch {
	case errors.As(err, &running), errors.Is(err, store.ErrCompactionConflict), errors.Is(err, store.ErrClaimLost):
		// The next turn began, or other replicas kept compacting: the next
		// turn's end tries again.
	case err != nil:
		r.log.WarnContext(ctx, "compaction failed; the history stays as it was", "err", err)
	case out.Changed:
		r.log.InfoContext(ctx, "compacted", "strategy", out.Record.Strategy,
			"tokens_before", out.Record.TokensBefore, "tokens_after", out.Record.TokensAfter)
	}
}

// compactAfterWaiting is the automatic compaction: it first waits for a
// compaction of the session running in this process (a manual one), then
// compacts from what that one left, which is under the threshold if it did
// the work — the strategies then change nothing, without a model call.
func (r *Runner) compactAfterWaiting(ctx context.Context, agent *Agent, sess store.Session) (CompactOutcome, error) {
	unlock, err := r.lockCompaction(ctx, sess.TenantID, sess.ID)
	if err != nil {
		return CompactOutcome{}, err
	}
	defer unlock()
	return r.compactTraced(ctx, agent, sess, TriggerAuto)
}

// lockCompaction takes the session's compaction lock of this process.
func (r *Runner) lockCompaction(ctx context.Context, tenantID, sessionID string) (func(), error) {
	unlock, err := r.compacting.lock(ctx, tenantID+"/"+sessionID)
	if err != nil {
		return nil, fmt.Errorf("wait for the running compaction of %s: %w", sessionID, err)
	}
	return unlock, nil
}

// compactRetrying compacts, recomputing from a fresh snapshot when another
// replica's compaction committed first, at most compactAttempts times. The
// caller holds the session's compaction lock.
func (r *Runner) compactRetrying(ctx context.Context, agent *Agent, sess store.Session, trigger string) (out CompactOutcome, err error) {
	defer func(start time.Time) { r.metrics.compacted(agent, trigger, start, out, err) }(time.Now())
	for attempt := 1; ; attempt++ {
		out, err = r.compact(ctx, agent, sess, trigger)
		if !errors.Is(err, store.ErrCompactionConflict) {
			return out, err
		}
		if attempt == compactAttempts {
			return CompactOutcome{}, fmt.Errorf("compact %s: %d attempts: %w", sess.ID, attempt, err)
		}
	}
}

// compact compacts a session's history with its agent's policy and stores
// the result, if the history has not changed meanwhile.
func (r *Runner) compact(ctx context.Context, agent *Agent, sess store.Session, trigger string) (CompactOutcome, error) {
	c := agent.Compaction
	if c == nil {
		return CompactOutcome{Reason: "the agent keeps its whole history: it has no compaction policy"}, nil
	}
	snap, err := r.store.CompactedSnapshotGet(ctx, sess.TenantID, sess.ID)
	if err != nil {
		return CompactOutcome{}, err
	}
	h := compaction.History{Items: make([]compaction.Item, len(snap.Messages))}
	for i, m := range snap.Messages {
		h.Items[i] = compaction.Item{Message: m.Message, Extra: m.Extra, SourceSeq: m.SourceSeq}
		if snap.ReportedTokens > 0 && m.Seq <= snap.ReportedUpTo {
			h.Usage = compaction.Usage{InputTokens: snap.ReportedTokens, Items: i + 1}
		}
	}
	policy := c.Policy
	tokens := compaction.Count(h.Items, h.Usage)
	if trigger == TriggerManual {
		// Asked for: compact now, as if the threshold had just been passed.
		if tokens <= policy.Target {
			return CompactOutcome{Tokens: tokens, Reason: "the history is already within the policy's target"}, nil
		}
		policy.Threshold = min(policy.Threshold, tokens-1)
	}
	summarizer := c.Summarizer
	if summarizer == nil {
		summarizer = modelSummarizer{agent: agent, options: agent.ResolveOptions(sess.AllOptions()), metrics: r.metrics}
	}
	strategy, err := compaction.New(policy.Strategy, summarizer)
	if err != nil {
		return CompactOutcome{}, err
	}
	res, err := strategy.Compact(ctx, h, policy)
	if err != nil {
		return CompactOutcome{}, fmt.Errorf("compact with %s: %w", policy.Strategy, err)
	}
	if !res.Changed || len(snap.Messages) == 0 {
		return CompactOutcome{Tokens: res.TokensBefore, Reason: "nothing can be compacted: what is left is protected (system prompt, newest messages, pending tool calls)"}, nil
	}
	p := store.CompactionApplyParams{
		TenantID: sess.TenantID, SessionID: sess.ID, BaseVersion: snap.Version,
		UpTo:  snap.Messages[len(snap.Messages)-1].Seq,
		Items: make([]store.CompactedItem, len(res.Items)),
		Record: store.Compaction{
			Trigger: trigger, Strategy: string(policy.Strategy), FromSeq: res.FirstSeq, ToSeq: res.LastSeq,
			MessagesBefore: len(h.Items), MessagesAfter: len(res.Items),
			TokensBefore: int64(res.TokensBefore), TokensAfter: int64(res.TokensAfter),
		},
	}
	for i, it := range res.Items {
		p.Items[i] = store.CompactedItem{SourceSeq: it.SourceSeq, Message: it.Message, Extra: it.Extra}
	}
	rec, err := r.store.CompactionApply(ctx, p)
	if err != nil {
		return CompactOutcome{}, err
	}
	return CompactOutcome{Changed: true, Record: rec}, nil
}

// summarizerPrompt instructs a model to write the summary that replaces the
// oldest part of a conversation.
const summarizerPrompt = `You summarize conversations between a user, an AI assistant and its tools, so that the assistant can continue the conversation without the original messages.
Keep every fact, decision, name, number, open question and commitment that may matter later; drop pleasantries and repetition.
Write plain prose or short bullet points in the language of the conversation. Do not continue the conversation and do not address the user.`

// modelSummarizer summarizes with the agent's own model, using the
// session's options (its model, its own API key).
type modelSummarizer struct {
	agent   *Agent
	options map[string]string
	metrics *Metrics
}

// Summarize shows the model the items as a transcript to summarize, not as
// a conversation to continue.
func (m modelSummarizer) Summarize(ctx context.Context, items []compaction.Item, maxTokens int) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "Summarize this transcript in at most %d words.\n\n<transcript>\n", max(maxTokens*3/4, 50))
	for _, it := range items {
		writeTranscript(&b, it.Message)
	}
	b.WriteString("</transcript>")
	req := ModelRequest{System: summarizerPrompt, Messages: Messages(aap.UserMessage(b.String())), Options: m.options}
	if m.agent.ModelOption != "" {
		req.Model = m.options[m.agent.ModelOption]
	}
	modelDone := m.metrics.modelCall(ctx, m.agent, req.Model)
	resp, err := generate(ctx, m.agent, req, func(ModelDelta) {})
	modelDone(resp.Usage, err)
	if err != nil {
		return "", fmt.Errorf("summarize: %w", err)
	}
	return strings.TrimSpace(resp.Message.Content.PlainText()), nil
}

func writeTranscript(b *strings.Builder, m aap.Message) {
	switch m.Role {
	case aap.RoleTool:
		fmt.Fprintf(b, "[tool result %s]\n%s\n\n", m.ToolCallID, m.Content.PlainText())
		return
	}
	fmt.Fprintf(b, "[%s]\n", m.Role)
	for _, blk := range m.Content.AsBlocks() {
		switch blk.Type {
		case aap.BlockText:
			b.WriteString(blk.Text + "\n")
		case aap.BlockToolUse:
			fmt.Fprintf(b, "(calls tool %s %s with %s)\n", blk.Name, blk.ToolCallID, blk.Input)
		case aap.BlockImage:
			b.WriteString("(an image)\n")
		}
	}
	b.WriteString("\n")
}
