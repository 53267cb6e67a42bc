package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// instanceLockKey is the first key of every instance's advisory lock
// ('AAPD'); the instance id is the second. aapd_instance_alive (see the
// migrations) looks for exactly this lock.
const instanceLockKey = 0x41415044

// Notification is a message another aapd process published with Notify.
type Notification struct {
	Channel string
	Payload string
}

// Instance is this process's presence in the database. It holds, on a
// connection of its own, an advisory lock keyed by the instance id for as
// long as the process lives: a process that dies loses its connection and
// with it the lock, so the claims it held are taken over at once. The same
// connection LISTENs for notifications from other processes.
type Instance struct {
	id       atomic.Int32
	connStr  string
	channels []string
	notify   func(Notification)

	mu     sync.Mutex
	conn   *pgx.Conn
	cancel context.CancelFunc
	done   chan struct{}
}

// InstanceParams configures StartInstance.
type InstanceParams struct {
	// Channels are the notification channels to LISTEN on.
	Channels []string
	// OnNotify receives each notification, on the instance's goroutine; it
	// must not block.
	OnNotify func(Notification)
}

// StartInstance takes a fresh instance id, holds its lock, and keeps
// holding it (reconnecting after a database outage) until Close.
func (s *Store) StartInstance(ctx context.Context, p InstanceParams) (*Instance, error) {
	in := &Instance{connStr: s.ConnString(), channels: p.Channels, notify: p.OnNotify, done: make(chan struct{})}
	if in.notify == nil {
		in.notify = func(Notification) {}
	}
	if err := in.connect(ctx, 0); err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	in.cancel = cancel
	go in.run(runCtx)
	return in, nil
}

// ID is the instance id recorded as the owner of the turns it runs.
func (in *Instance) ID() int32 { return in.id.Load() }

// Close releases the lock and stops listening.
func (in *Instance) Close() {
	in.cancel()
	<-in.done
}

// connect opens the instance's connection and takes the lock for id, or for
// a new random id when id is zero or taken.
func (in *Instance) connect(ctx context.Context, id int32) error {
	conn, err := pgx.Connect(ctx, in.connStr)
	if err != nil {
		return fmt.Errorf("instance: connect: %w", interpretError(err))
	}
	for attempt := 0; ; attempt++ {
		if id == 0 || attempt > 0 {
			id = rand.Int32N(1<<31-2) + 1
		}
		var ok bool
		if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1, $2)`, int32(instanceLockKey), id).Scan(&ok); err != nil {
			conn.Close(context.Background())
			return fmt.Errorf("instance: lock: %w", interpretError(err))
		}
		if ok {
			break
		}
	}
	for _, ch := range in.channels {
		if _, err := conn.Exec(ctx, `LISTEN `+pgx.Identifier{ch}.Sanitize()); err != nil {
			conn.Close(context.Background())
			return fmt.Errorf("instance: listen %s: %w", ch, interpretError(err))
		}
	}
	in.mu.Lock()
	in.conn = conn
	in.mu.Unlock()
	in.id.Store(id)
	return nil
}

// MaxReconnectBackoff bounds the wait between attempts of an instance to
// reconnect. While its connection is down (a database restart), a live
// process looks dead to the others; they wait long enough for it to come
// back (agents' follower) before ending its turns.
const MaxReconnectBackoff = time.Second

// run waits for notifications and, when the connection breaks, reconnects
// with backoff, keeping the same id if it is still free.
func (in *Instance) run(ctx context.Context) {
	defer close(in.done)
	defer func() {
		in.mu.Lock()
		if in.conn != nil {
			in.conn.Close(context.Background())
		}
		in.mu.Unlock()
	}()
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		in.mu.Lock()
		conn := in.conn
		in.mu.Unlock()
		if conn == nil {
			if err := in.connect(ctx, in.id.Load()); err != nil {
				slog.Warn("instance: reconnect failed", "err", err, "retry_in", backoff)
				select {
				case <-ctx.Done():
				case <-time.After(backoff):
				}
				backoff = min(backoff*2, MaxReconnectBackoff)
				continue
			}
			slog.Info("instance: reconnected", "instance", in.id.Load())
			backoff = 100 * time.Millisecond
			continue
		}
		waitCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		n, err := conn.WaitForNotification(waitCtx)
		cancel()
		switch {
		case err == nil:
			in.notify(Notification{Channel: n.Channel, Payload: n.Payload})
		case ctx.Err() != nil:
		case errors.Is(err, context.DeadlineExceeded) && !conn.IsClosed():
			// Idle: make sure the connection, and so the lock, is still there.
			pingCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err = conn.Ping(pingCtx)
			cancel()
			if err == nil {
				continue
			}
			fallthrough
		default:
			slog.Warn("instance: connection lost", "instance", in.id.Load(), "err", err)
			conn.Close(context.Background())
			in.mu.Lock()
			in.conn = nil
			in.mu.Unlock()
		}
	}
}

// Notify publishes a notification to every process listening on channel.
func (s *Store) Notify(ctx context.Context, channel, payload string) error {
	if _, err := s.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, channel, payload); err != nil {
		return fmt.Errorf("notify %s: %w", channel, interpretError(err))
	}
	return nil
}
