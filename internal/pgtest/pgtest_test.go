package pgtest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestStartServesQueriesAndStops(t *testing.T) {
	s := Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.DSN)
	if err != nil {
		t.Fatal(err)
	}
	var v int
	if err := conn.QueryRow(ctx, "SELECT 40 + 2").Scan(&v); err != nil || v != 42 {
		t.Fatalf("SELECT = %d, %v", v, err)
	}
	conn.Close(ctx)
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := pgx.Connect(ctx, s.DSN); err == nil {
		t.Fatal("connected to a killed server")
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	conn, err = pgx.Connect(ctx, s.DSN)
	if err != nil {
		t.Fatalf("after restart: %v", err)
	}
	conn.Close(ctx)
}

func TestCPUTimeGrowsWithWork(t *testing.T) {
	s := Start(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, s.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	before := s.CPUTime()
	if _, err := conn.Exec(ctx, "SELECT count(*) FROM generate_series(1, 3000000)"); err != nil {
		t.Fatal(err)
	}
	if after := s.CPUTime(); after <= before {
		t.Fatalf("server CPU %v then %v after a busy query", before, after)
	}
}
