package respstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func open(t *testing.T, o Options) *Store {
	t.Helper()
	s, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestStore(t *testing.T) {
	ctx := context.Background()
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	path := filepath.Join(t.TempDir(), "sub", "responses.db")
	tests := []struct {
		name string
		run  func(t *testing.T, s *Store)
	}{
		{"put get delete", func(t *testing.T, s *Store) {
			if err := s.Put(ctx, Entry{ID: "resp_a", Response: []byte(`{"id":"resp_a"}`), History: []byte(`[]`)}); err != nil {
				t.Fatal(err)
			}
			e, err := s.Get(ctx, "resp_a")
			if err != nil || string(e.Response) != `{"id":"resp_a"}` || string(e.History) != `[]` || !e.Created.Equal(c.now()) {
				t.Fatalf("get = %+v, %v", e, err)
			}
			if err := s.Delete(ctx, "resp_a"); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Get(ctx, "resp_a"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("get after delete: %v", err)
			}
			if err := s.Delete(ctx, "resp_a"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("second delete: %v", err)
			}
		}},
		{"ttl", func(t *testing.T, s *Store) {
			if err := s.Put(ctx, Entry{ID: "old", Response: []byte(`1`), History: []byte(`[]`)}); err != nil {
				t.Fatal(err)
			}
			c.add(2 * time.Hour)
			if _, err := s.Get(ctx, "old"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("expired entry readable: %v", err)
			}
			if err := s.Put(ctx, Entry{ID: "new", Response: []byte(`2`), History: []byte(`[]`)}); err != nil {
				t.Fatal(err)
			}
			var n int
			if err := s.db.QueryRow(`SELECT COUNT(*) FROM responses WHERE id = 'old'`).Scan(&n); err != nil || n != 0 {
				t.Fatalf("expired row kept: %d %v", n, err)
			}
		}},
		{"size cap evicts oldest", func(t *testing.T, s *Store) {
			for i := range 5 {
				c.add(time.Second)
				body := make([]byte, 100)
				if err := s.Put(ctx, Entry{ID: fmt.Sprintf("r%d", i), Response: body, History: []byte(`[]`)}); err != nil {
					t.Fatal(err)
				}
			}
			// Cap 350: each entry is 100+2+2 = 104 bytes, so three stay.
			for i, want := range []bool{false, false, true, true, true} {
				_, err := s.Get(ctx, fmt.Sprintf("r%d", i))
				if (err == nil) != want {
					t.Errorf("r%d present = %v, want %v", i, err == nil, want)
				}
			}
			if err := s.Put(ctx, Entry{ID: "huge", Response: make([]byte, 1000)}); err == nil {
				t.Error("entry above the cap stored")
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t, Options{Path: path + tc.name, TTL: time.Hour, MaxBytes: 350, Now: c.now})
			tc.run(t, s)
		})
	}
	_ = path
}

// TestStoreAcrossProcesses writes from a child process (this test binary
// re-run) and reads here: the store is shared through the file.
func TestStoreAcrossProcesses(t *testing.T) {
	if path := getenv("RESPSTORE_CHILD_PATH"); path != "" {
		s, err := Open(Options{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		for i := range 20 {
			if err := s.Put(context.Background(), Entry{ID: fmt.Sprintf("child%d", i), Response: []byte(`{}`), History: []byte(`[]`)}); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	path := filepath.Join(t.TempDir(), "shared.db")
	s := open(t, Options{Path: path})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 20 {
			if err := s.Put(context.Background(), Entry{ID: fmt.Sprintf("parent%d", i), Response: []byte(`{}`), History: []byte(`[]`)}); err != nil {
				t.Error(err)
			}
		}
	}()
	cmd := exec.Command(testBinary(t), "-test.run", "^TestStoreAcrossProcesses$")
	cmd.Env = append(cmd.Environ(), "RESPSTORE_CHILD_PATH="+path)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	wg.Wait()
	for _, id := range []string{"child0", "child19", "parent0", "parent19"} {
		if _, err := s.Get(context.Background(), id); err != nil {
			t.Errorf("get %s: %v", id, err)
		}
	}
	var mode string
	if err := s.db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode = %q, %v; want wal", mode, err)
	}
}

// TestOpenConcurrently opens one new store file from several processes at
// once (this test binary re-run), as the frontends of one port do when they
// start together: each Open must succeed (the first creates the schema and
// turns on WAL; the others wait for it instead of failing with SQLITE_BUSY,
// which once made a frontend exit at start).
func TestOpenConcurrently(t *testing.T) {
	if path := getenv("RESPSTORE_OPEN_PATH"); path != "" {
		s, err := Open(Options{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		return
	}
	for round := range 5 {
		path := filepath.Join(t.TempDir(), fmt.Sprintf("race%d.db", round))
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cmd := exec.Command(testBinary(t), "-test.run", "^TestOpenConcurrently$")
				cmd.Env = append(cmd.Environ(), "RESPSTORE_OPEN_PATH="+path)
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Errorf("round %d: child: %v\n%s", round, err, out)
				}
			}()
		}
		wg.Wait()
		if t.Failed() {
			return
		}
	}
}

// TestIsBusy: a write refused because another connection holds the file's
// lock is SQLITE_BUSY (what Open retries); other errors are not.
func TestIsBusy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "busy.db")
	s := open(t, Options{Path: path})
	holder, err := s.db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback() }()
	if _, err := holder.Exec(`DELETE FROM responses`); err != nil { // takes the write lock
		t.Fatal(err)
	}
	other, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(0)")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	_, err = other.Exec(`DELETE FROM responses`)
	if !isBusy(err) {
		t.Fatalf("write under another connection's lock: %v, want SQLITE_BUSY", err)
	}
	if _, err := other.Exec(`SELECT nosuchcolumn FROM responses`); err == nil || isBusy(err) {
		t.Fatalf("a bad statement: %v, want an error that is not SQLITE_BUSY", err)
	}
}
