// Package respstore keeps stored Responses API objects (POST /v1/responses
// with store: true) so that GET /v1/responses/{id}, DELETE and
// previous_response_id work on every frontend of a host.
//
// The store is one SQLite file (through the pure-Go modernc.org/sqlite
// driver) in WAL mode, opened by every frontend process that shares a port:
// readers never block the writer, and a busy timeout serializes writers
// across processes. Entries expire after a TTL, and the oldest go first when
// the stored bytes pass a cap; both are checked on every Put. Across hosts a
// shared file does not work (SQLite's locking needs one host's file system);
// see docs/DEPLOY.md.
package respstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// busyWait bounds how long Open retries its schema statement while another
// process holds the file (the DSN's busy_timeout, which SQLite does not
// apply to every lock it meets while a new file turns to WAL).
const busyWait = 10 * time.Second

// isBusy reports whether err is SQLite's SQLITE_BUSY (any extended code).
func isBusy(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == 5 // SQLITE_BUSY
}

// ErrNotFound is returned by Get and Delete when no live entry has the id.
var ErrNotFound = errors.New("respstore: response not found")

// Options configure a Store.
type Options struct {
	// Path is the SQLite file; its directory is created (mode 0700).
	Path string
	// MaxBytes caps the stored bytes (responses plus histories); the oldest
	// entries are deleted beyond it. 0: no cap.
	MaxBytes int64
	// TTL is how long an entry lives. 0: forever.
	TTL time.Duration
	// Now is the clock (nil: time.Now); tests inject one.
	Now func() time.Time
}

// Entry is one stored response.
type Entry struct {
	// ID is the response id (resp_…).
	ID string
	// Response is the response object as GET returns it (JSON).
	Response []byte
	// History is the conversation that previous_response_id continues: the
	// request's input items followed by the response's output items (a JSON
	// array of Responses input items).
	History []byte
	// Created is when the entry was stored.
	Created time.Time
}

// Store is a response store; it is safe for concurrent use by goroutines
// and by processes sharing the file.
type Store struct {
	db  *sql.DB
	o   Options
	now func() time.Time
}

const schema = `CREATE TABLE IF NOT EXISTS responses (
	id       TEXT PRIMARY KEY,
	created  INTEGER NOT NULL,
	size     INTEGER NOT NULL,
	response BLOB NOT NULL,
	history  BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS responses_created ON responses(created);`

// Open opens (creating when missing) the store at o.Path.
func Open(o Options) (*Store, error) {
	if o.Path == "" {
		return nil, errors.New("respstore: empty path")
	}
	if err := os.MkdirAll(filepath.Dir(o.Path), 0o700); err != nil {
		return nil, fmt.Errorf("create store directory: %w", err)
	}
	dsn := "file:" + o.Path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open response store %s: %w", o.Path, err)
	}
	// One connection per process: SQLite allows one writer anyway, and the
	// busy timeout handles the other processes.
	db.SetMaxOpenConns(1)
	// Frontends that share a port start together and open the same file:
	// one creates the schema and turns on WAL while the others may get
	// SQLITE_BUSY at once (seen in CI: a frontend exited at start), so a
	// busy schema statement is retried for up to busyWait.
	_, err = db.Exec(schema)
	for start := time.Now(); err != nil && isBusy(err) && time.Since(start) < busyWait; {
		time.Sleep(20 * time.Millisecond)
		_, err = db.Exec(schema)
	}
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("create response store schema in %s: %w", o.Path, err)
	}
	now := o.Now
	if now == nil {
		now = time.Now
	}
	return &Store{db: db, o: o, now: now}, nil
}

// Close closes the database.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close response store: %w", err)
	}
	return nil
}

// Put stores e (replacing an entry with the same id), then deletes expired
// entries and, past MaxBytes, the oldest ones. e.Created is set to now when
// zero.
func (s *Store) Put(ctx context.Context, e Entry) error {
	if e.Created.IsZero() {
		e.Created = s.now()
	}
	size := int64(len(e.Response) + len(e.History) + len(e.ID))
	if s.o.MaxBytes > 0 && size > s.o.MaxBytes {
		return fmt.Errorf("store response %s: %d bytes exceed the store's cap of %d", e.ID, size, s.o.MaxBytes)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin store transaction: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO responses(id, created, size, response, history) VALUES(?, ?, ?, ?, ?)`,
		e.ID, e.Created.UnixNano(), size, e.Response, e.History); err != nil {
		return fmt.Errorf("insert response %s: %w", e.ID, err)
	}
	if s.o.TTL > 0 {
		if _, err := tx.ExecContext(ctx, `DELETE FROM responses WHERE created < ?`, s.now().Add(-s.o.TTL).UnixNano()); err != nil {
			return fmt.Errorf("expire responses: %w", err)
		}
	}
	if s.o.MaxBytes > 0 {
		var total int64
		if err := tx.QueryRowContext(ctx, `SELECT COALESCE(SUM(size), 0) FROM responses`).Scan(&total); err != nil {
			return fmt.Errorf("sum stored bytes: %w", err)
		}
		for total > s.o.MaxBytes {
			var id string
			var sz int64
			err := tx.QueryRowContext(ctx, `SELECT id, size FROM responses WHERE id != ? ORDER BY created, id LIMIT 1`, e.ID).Scan(&id, &sz)
			if errors.Is(err, sql.ErrNoRows) {
				break
			}
			if err != nil {
				return fmt.Errorf("find oldest response: %w", err)
			}
			if _, err := tx.ExecContext(ctx, `DELETE FROM responses WHERE id = ?`, id); err != nil {
				return fmt.Errorf("evict response %s: %w", id, err)
			}
			total -= sz
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit response %s: %w", e.ID, err)
	}
	return nil
}

// Get returns the live entry with id, or ErrNotFound.
func (s *Store) Get(ctx context.Context, id string) (Entry, error) {
	e := Entry{ID: id}
	var created int64
	err := s.db.QueryRowContext(ctx, `SELECT created, response, history FROM responses WHERE id = ?`, id).Scan(&created, &e.Response, &e.History)
	if errors.Is(err, sql.ErrNoRows) {
		return Entry{}, ErrNotFound
	}
	if err != nil {
		return Entry{}, fmt.Errorf("read response %s: %w", id, err)
	}
	e.Created = time.Unix(0, created)
	if s.o.TTL > 0 && s.now().Sub(e.Created) > s.o.TTL {
		return Entry{}, ErrNotFound
	}
	return e, nil
}

// Delete removes the entry with id; ErrNotFound when there is none.
func (s *Store) Delete(ctx context.Context, id string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM responses WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("delete response %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	return nil
}
