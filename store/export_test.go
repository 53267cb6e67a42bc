package store

// What the listing tests EXPLAIN: the listings' exact statements.
const (
	SessionListSQL        = sessionListSQL
	SessionListByOwnerSQL = sessionListByOwnerSQL
	TurnListSQL           = turnListSQL
	UsageSQL              = usageSQL
)
