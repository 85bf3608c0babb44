package store

import (
	"errors"
	"fmt"
	"os"
)

// walFile is the store's own handle on the WAL, used to make a committed Put batch durable
// with fdatasync instead of SQLite's fsync.
//
// Why not let SQLite sync: modernc.org/sqlite is built without HAVE_FDATASYNC, so every
// synchronous=FULL commit calls fsync(2) on the WAL. The commit also changed the file's mtime,
// and on a journaled ext4 (data=ordered, the usual setup) fsync then has to commit the
// filesystem's journal: one journal shared by every file on the disk, whose commit also waits
// for the data of files with newly allocated blocks (the database file the checkpointer is
// filling, other processes' writes). fdatasync skips metadata that is not needed to read the
// data back (the mtime), so a commit that overwrites WAL blocks the file already has is a data
// write plus a cache flush and no journal commit, as PostgreSQL's fdatasync on its recycled WAL
// segments is. Measured on a journaled ext4 (docs/benchmarks.md, "Webhook acknowledgement"):
// 3,000 WAL syncs at 500/s cost 1,148 journal commits with fsync and 2 with fdatasync. SQLite
// itself says an fdatasync is always adequate for it (os_unix.c, full_fsync).
//
// What makes this as durable as synchronous=FULL: the write connection commits at NORMAL, which
// in WAL mode differs from FULL only in skipping the sync of the WAL after the commit frame (the
// WAL header is still synced when the WAL restarts, and checkpoints still sync the WAL before
// copying and the database file before the WAL may be reused). The writer then fdatasyncs the
// WAL file before it lets go of the write connection and before any caller is answered, so no
// Claim can hand the batch to a worker and no 202 is sent before every frame of the batch is
// on disk.
//
// The handle is the store's own descriptor, opened and closed beside SQLite's. That is safe for the
// WAL and for no other file of the database: SQLite holds POSIX record locks on the database file
// and the -shm file (traced: fcntl F_SETLK on those two only), and closing any descriptor of a
// file drops every such lock the process holds on it; the WAL carries none.
type walFile struct {
	path string
	f    *os.File
}

func openWALFile(path string) (*walFile, error) {
	f, err := os.Open(path) // fdatasync needs no write access
	if err != nil {
		return nil, fmt.Errorf("open the WAL to sync it: %w", err)
	}
	return &walFile{path: path, f: f}, nil
}

// sync makes everything written to the WAL so far durable. It refuses to report success for a
// file that is no longer the WAL: SQLite deletes the WAL only when its last connection closes,
// which the store's own open write connection rules out, but an fdatasync of an unlinked file
// would make nothing durable, so the check (one fstat) is made every time.
func (w *walFile) sync() error {
	if err := fdatasync(w.f); err != nil {
		return fmt.Errorf("fdatasync %s: %w", w.path, err)
	}
	fi, err := w.f.Stat()
	if err != nil {
		return fmt.Errorf("stat %s: %w", w.path, err)
	}
	if n, ok := linkCount(fi); ok && n == 0 {
		return fmt.Errorf("sync %s: %w", w.path, errWALReplaced)
	}
	return nil
}

func (w *walFile) Close() error { return w.f.Close() }

// errWALReplaced: the WAL file the store holds was unlinked, so syncing it proves nothing.
var errWALReplaced = errors.New("the WAL file was deleted or replaced under the store")
