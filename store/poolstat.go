package store

import "time"

// PoolStat is a snapshot of the connection pool, for metrics: plain
// values, so that nothing outside store sees pgx's types.
type PoolStat struct {
	// AcquiredConns are in use; IdleConns wait to be; TotalConns are both
	// and those being opened. MaxConns bounds TotalConns.
	AcquiredConns int32
	IdleConns     int32
	TotalConns    int32
	MaxConns      int32
	// AcquireCount counts successful acquires since the pool opened, and
	// AcquireDuration is the time they spent waiting, in total.
	AcquireCount    int64
	AcquireDuration time.Duration
	// EmptyAcquireCount counts acquires that had to wait for a connection
	// because none was idle.
	EmptyAcquireCount int64
}

// PoolStat returns a snapshot of the connection pool.
func (s *Store) PoolStat() PoolStat {
	st := s.pool.Stat()
	return PoolStat{
		AcquiredConns: st.AcquiredConns(), IdleConns: st.IdleConns(), TotalConns: st.TotalConns(),
		MaxConns: st.MaxConns(), AcquireCount: st.AcquireCount(), AcquireDuration: st.AcquireDuration(),
		EmptyAcquireCount: st.EmptyAcquireCount(),
	}
}
