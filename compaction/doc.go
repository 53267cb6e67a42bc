// Package compaction shrinks a session's compacted history — what the model
// sees — when it grows past an agent's token budget. The full history is
// never touched: compaction only ever rewrites the separate compacted copy.
//
// Three strategies sit behind one interface (Strategy), chosen per agent by a
// Policy:
//
//   - window drops the oldest messages;
//   - prune_tool_results first replaces bulky old tool results with a short
//     placeholder, then drops the oldest messages if that was not enough;
//   - summarize replaces the oldest messages with one summary written by a
//     Summarizer (in aapd, the agent's own model), so their facts survive.
//
// Every strategy keeps the same promises, for every input:
//
//   - the system messages that open the history (the seeded system prompt)
//     stay;
//   - a tool call is never separated from its results: an assistant message
//     with tool_use blocks and the tool messages answering it are kept,
//     dropped or summarized together, and an unresolved call at the end stays;
//   - the newest Policy.KeepLast messages stay verbatim, provider data
//     (Item.Extra) included;
//   - after anything is dropped or summarized, the first message after the
//     leading system messages is a user message, as every provider accepts;
//   - items are only dropped or replaced by something compaction wrote (a
//     placeholder or a summary, SourceSeq 0), never reordered, and the items
//     kept are byte-identical with their SourceSeq unchanged;
//   - compacting a compacted history again with the same policy changes
//     nothing.
//
// The package is pure apart from the Summarizer it may call: it does no I/O
// and imports neither the store nor the agents package, which adapts its
// Model to Summarizer and writes Result.Items back to the store.
package compaction
