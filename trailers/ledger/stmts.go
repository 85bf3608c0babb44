package ledger

import (
	"context"
	"database/sql"
	"sync"
)

// readStmts keeps the ledger's hot read queries prepared once per Ledger. The SQLite driver
// (modernc.org/sqlite) parses a query's SQL on every call otherwise, and that parsing was the
// largest part of a judgement's ledger time: every review that runs the policy's git_value() in
// an owner_when asks the ledger for a field's history (three queries). Only constant query texts
// come here, so the set stays as small as the code's list of queries. A *sql.Stmt is safe for
// concurrent use; SQLite re-prepares it by itself if the schema changes under it.
type readStmts struct {
	mu sync.Mutex
	m  map[string]*sql.Stmt
}

func (s *readStmts) get(ctx context.Context, db *sql.DB, query string) (*sql.Stmt, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.m[query]; ok {
		return st, nil
	}
	st, err := db.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	if s.m == nil {
		s.m = map[string]*sql.Stmt{}
	}
	s.m[query] = st
	return st, nil
}

func (s *readStmts) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range s.m {
		_ = st.Close()
	}
	s.m = nil
}

// query runs a constant read query through its prepared statement.
func (l *Ledger) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	st, err := l.stmts.get(ctx, l.db, query)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}
