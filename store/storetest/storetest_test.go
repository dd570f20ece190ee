package storetest

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"
)

// TestSweep: the databases of this host's ended test processes are
// dropped; a living process's are kept.
func TestSweep(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Postgres")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn := connectAdmin(ctx, t)
	defer conn.Close(ctx)
	// Above any pid_max: never a living process.
	gone := fmt.Sprintf("%s%d_sweeptest", ownPrefix(), 1<<23)
	mine := fmt.Sprintf("%s%d_sweeptest", ownPrefix(), os.Getpid())
	for _, name := range []string{gone, mine} {
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, name := range []string{gone, mine} {
			_, _ = conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		}
	})
	sweep(ctx, conn)
	exists := func(name string) bool {
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	if exists(gone) {
		t.Errorf("%s, of an ended process, was kept", gone)
	}
	if !exists(mine) {
		t.Errorf("%s, of this process, was dropped", mine)
	}
}
