package storetest

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
)

// A Citus coordinator as the test server (make test-citus): every test
// database is made a Citus database of its own, on the coordinator and on
// each worker, so that aapd's migrations distribute its schema there as
// they would in production.

// citusNode is a node of a Citus cluster as pg_dist_node names it.
type citusNode struct {
	host string
	port int
}

// citusCluster returns the coordinator and the workers of the cluster
// whose coordinator base is, or ok false when base is plain PostgreSQL.
func citusCluster(ctx context.Context, base string) (coord citusNode, workers []citusNode, ok bool, err error) {
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return coord, nil, false, fmt.Errorf("connect to %s: %w\n%s", EnvURL, err, howTo)
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')`).Scan(&ok); err != nil || !ok {
		return coord, nil, false, err
	}
	rows, err := conn.Query(ctx, `SELECT nodename, nodeport, groupid = 0 FROM pg_dist_node
		WHERE noderole = 'primary' AND isactive ORDER BY groupid`)
	if err != nil {
		return coord, nil, false, fmt.Errorf("read the Citus nodes: %w", err)
	}
	defer rows.Close()
	found := false
	for rows.Next() {
		var n citusNode
		var isCoord bool
		if err := rows.Scan(&n.host, &n.port, &isCoord); err != nil {
			return coord, nil, false, err
		}
		if isCoord {
			coord, found = n, true
		} else {
			workers = append(workers, n)
		}
	}
	if err := rows.Err(); err != nil {
		return coord, nil, false, err
	}
	if !found || len(workers) == 0 {
		return coord, nil, false, fmt.Errorf("%s has the citus extension but no coordinator and workers in pg_dist_node: "+
			"run citus_set_coordinator_host and citus_add_node there (../shared/citus/citus-up.sh does)", EnvURL)
	}
	return coord, workers, true, nil
}

// onNode returns base pointed at another node of the cluster.
func onNode(base string, n citusNode) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", fmt.Errorf("parse %s (a Citus coordinator must be given as a URL): %w", EnvURL, err)
	}
	u.Host = net.JoinHostPort(n.host, strconv.Itoa(n.port))
	return u.String(), nil
}

// citusJoin makes the new database name a Citus database: the same
// database on every worker, the extension on every node, and the workers
// registered with the coordinator's copy.
func citusJoin(ctx context.Context, base, name string, coord citusNode, workers []citusNode) error {
	for _, w := range workers {
		wbase, err := onNode(base, w)
		if err != nil {
			return err
		}
		if err := execOn(ctx, wbase, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
			return fmt.Errorf("create test database on worker %s:%d: %w", w.host, w.port, err)
		}
		wdb, err := withDatabase(wbase, name)
		if err != nil {
			return err
		}
		if err := execOn(ctx, wdb, "CREATE EXTENSION citus"); err != nil {
			return fmt.Errorf("create extension citus on worker %s:%d: %w", w.host, w.port, err)
		}
	}
	cdb, err := withDatabase(base, name)
	if err != nil {
		return err
	}
	if err := execOn(ctx, cdb, "CREATE EXTENSION citus"); err != nil {
		return fmt.Errorf("create extension citus on the coordinator: %w", err)
	}
	if err := execOn(ctx, cdb, "SELECT citus_set_coordinator_host($1, $2)", coord.host, coord.port); err != nil {
		return fmt.Errorf("set the coordinator of the test database: %w", err)
	}
	for _, w := range workers {
		if err := execOn(ctx, cdb, "SELECT citus_add_node($1, $2)", w.host, w.port); err != nil {
			return fmt.Errorf("add worker %s:%d to the test database: %w", w.host, w.port, err)
		}
	}
	return nil
}

// citusDrop drops a test database from the workers.
func citusDrop(ctx context.Context, base, name string, workers []citusNode) {
	for _, w := range workers {
		if wbase, err := onNode(base, w); err == nil {
			dropDatabase(ctx, wbase, name)
		}
	}
}

func execOn(ctx context.Context, u, sql string, args ...any) error {
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql, args...)
	return err
}

// CitusWorkerURL returns the URL of the package's test database on a
// worker node of the Citus cluster (make test-citus); the test is skipped
// on plain PostgreSQL.
func CitusWorkerURL(t testing.TB) string {
	t.Helper()
	return CitusWorkerURLOf(t, URL(t))
}

// CitusWorkerURLOf returns the URL of a test database (the package's, or
// one of NewDatabase) on a worker node of the Citus cluster; the test is
// skipped on plain PostgreSQL.
func CitusWorkerURLOf(t testing.TB, dbURL string) string {
	t.Helper()
	if !citus {
		t.Skip("needs a Citus cluster (make test-citus)")
	}
	u, err := onNode(dbURL, citusWorkers[0])
	if err != nil {
		t.Fatal(err)
	}
	return u
}
