package store

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Known sources. A source names the system a delivery came from; IDs are unique per source.
const (
	SourceGitHub     = "github"
	SourceFlux       = "flux"
	SourceArgoCD     = "argocd"
	SourceK8sAudit   = "k8s-audit"
	SourceCloudTrail = "cloudtrail"
)

// State is where a delivery is in its life.
type State int

const (
	// StatePending: waiting to be processed, possibly leased by a worker right now, possibly
	// scheduled for a later attempt (NextAttemptAt).
	StatePending State = iota
	// StateDone: a handler finished it (or no handler wanted it).
	StateDone
	// StateDead: it failed permanently or ran out of attempts; only Replay brings it back.
	StateDead
)

func (s State) String() string {
	switch s {
	case StatePending:
		return "pending"
	case StateDone:
		return "done"
	case StateDead:
		return "dead"
	default:
		return fmt.Sprintf("State(%d)", int(s))
	}
}

// Key identifies a delivery: the source and the source's own event ID (X-GitHub-Delivery for
// GitHub). A redelivery of the same event carries the same Key.
type Key struct {
	Source string
	ID     string
}

func (k Key) String() string { return k.Source + "/" + k.ID }

// Delivery is one event received from a source.
//
// The caller of Put fills Source, ID, Event, Body, ReceivedAt and Scope; the remaining fields
// are the store's bookkeeping and are ignored by Put.
type Delivery struct {
	Source     string
	ID         string
	Event      string
	Body       []byte
	ReceivedAt time.Time
	// Scope is the cluster a drift event came from, taken from the endpoint path
	// /events/<source>/<cluster>; empty when the event was posted to /events/<source>.
	// It is not part of the Key: a second Put with the same Key and another Scope is a
	// duplicate, and the first Scope stands (the drift receivers put the cluster in the ID,
	// webhooks.ScopedDeliveryID, so that never happens to them). It is part of the body
	// digest Put deduplicates by.
	Scope string

	State State
	// Attempts counts claims: it is incremented when a worker claims the delivery, and
	// given back by Release (a drain is not a failed attempt).
	Attempts      int
	NextAttemptAt time.Time
	LastError     string
	LeaseOwner    string
	LeaseUntil    time.Time
}

// Key returns the delivery's identity.
func (d Delivery) Key() Key { return Key{Source: d.Source, ID: d.ID} }

// Validate reports the first missing or malformed field a Put would refuse.
func (d Delivery) Validate() error {
	switch {
	case d.Source == "":
		return errors.New("delivery: source is empty")
	case d.ID == "":
		return fmt.Errorf("delivery from %s: id is empty", d.Source)
	case d.Event == "":
		return fmt.Errorf("delivery %s/%s: event is empty", d.Source, d.ID)
	case d.ReceivedAt.IsZero():
		return fmt.Errorf("delivery %s/%s: received-at is zero", d.Source, d.ID)
	}
	if d.Scope != "" {
		if err := ValidScope(d.Scope); err != nil {
			return fmt.Errorf("delivery %s/%s: %w", d.Source, d.ID, err)
		}
	}
	return nil
}

// maxScopeLen is the longest valid Delivery.Scope: a DNS label's length.
const maxScopeLen = 63

// ValidScope reports whether s is a valid Delivery.Scope (a cluster name): 1 to 63
// characters of A-Z, a-z, 0-9, '.', '_' and '-', the first a letter or digit. The error names
// the bad value (quoted, and cut short when it is very long).
func ValidScope(s string) error {
	bad := func(why string) error {
		shown := strconv.Quote(s)
		if len(s) > 2*maxScopeLen {
			shown = strconv.Quote(s[:2*maxScopeLen]) + "..."
		}
		return fmt.Errorf("cluster name %s %s: want 1 to %d letters, digits, '.', '_' or '-', starting with a letter or digit",
			shown, why, maxScopeLen)
	}
	switch {
	case s == "":
		return bad("is empty")
	case len(s) > maxScopeLen:
		return bad(fmt.Sprintf("is %d bytes long", len(s)))
	case !isAlnum(s[0]):
		return bad("does not start with a letter or digit")
	}
	for i, c := range s {
		if c >= 0x80 || !isAlnum(byte(c)) && c != '.' && c != '_' && c != '-' {
			return bad(fmt.Sprintf("has %q at byte %d", c, i))
		}
	}
	return nil
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// Stats is a snapshot of the queue for metrics.
type Stats struct {
	// Pending counts deliveries not yet done or dead, leased or not.
	Pending int
	// Leased counts pending deliveries whose lease has not expired at the time asked.
	Leased int
	// OldestPending is the ReceivedAt of the oldest pending delivery; zero when none is pending.
	OldestPending time.Time
	// Dead counts dead-lettered deliveries.
	Dead int
}

// FailOutcome says what Fail did with a delivery.
type FailOutcome int

const (
	// Retrying: the delivery is pending again and due at the given next attempt.
	Retrying FailOutcome = iota
	// DeadLettered: the delivery had used its last attempt and is now dead.
	DeadLettered
)

func (o FailOutcome) String() string {
	if o == DeadLettered {
		return "dead-lettered"
	}
	return "retrying"
}

var (
	// ErrNotFound: no delivery with that key.
	ErrNotFound = errors.New("delivery not found")
	// ErrLeaseLost: the caller no longer holds the lease (it expired and another worker
	// claimed the delivery, or the delivery was finished by someone else). The caller must
	// drop the delivery without further effects.
	ErrLeaseLost = errors.New("lease lost")
	// ErrNotDead: Replay was asked for a delivery that is not dead-lettered.
	ErrNotDead = errors.New("delivery is not dead-lettered")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("store closed")
	// ErrDuplicateBody: Put was given a body already stored under another ID of the same
	// source. See DuplicateBodyError.
	ErrDuplicateBody = errors.New("body already stored under another delivery id")
)

// DuplicateBodyError is Put's answer to a delivery whose body is byte for byte one already
// stored, under another ID, from the same source: nothing is inserted. GitHub signs only the
// body, not X-GitHub-Delivery or X-GitHub-Event, so a captured delivery replayed under a new ID
// (or relabelled as another event) carries a valid signature; its body gives it away.
// errors.Is(err, ErrDuplicateBody) holds.
type DuplicateBodyError struct {
	Key    Key // the delivery refused
	Stored Key // the delivery that holds the same body
}

func (e *DuplicateBodyError) Error() string {
	return fmt.Sprintf("delivery %s: body already stored as %s", e.Key, e.Stored.ID)
}

// Is makes errors.Is(err, ErrDuplicateBody) hold.
func (e *DuplicateBodyError) Is(target error) bool { return target == ErrDuplicateBody }

// Deliveries is the durable queue contract. SQLite implements it for one replica; a Postgres
// implementation serving several replicas must keep the same semantics:
//
//   - Put is durable when it returns: the row is committed (and, for the default SQLite mode,
//     fsynced) before Put reports inserted=true, and a receiver may acknowledge then. The
//     other writes need only survive a process crash: losing one to a power failure makes a
//     delivery be processed again, which handlers tolerate, but never loses one. A second
//     Put with the same Key inserts nothing and reports inserted=false (Postgres:
//     INSERT ... ON CONFLICT (source, id) DO NOTHING RETURNING). A Put whose non-empty body
//     was already stored under another ID of the same source inserts nothing either and
//     returns inserted=false with a *DuplicateBodyError naming the stored delivery (a unique
//     index on the body's SHA-256 per source). A scoped delivery's digest covers its Scope
//     (bodyDigest), so the same body under two scopes, or under a scope and none, is not a
//     duplicate. Deliveries stored before that index existed have no digest and are not
//     compared; scoped ones stored before the digest covered the scope keep the bare body's
//     digest, which no new scoped Put computes: they are not rewritten (a row leased by a
//     replica still running the old version must keep its key), and Prune retires them with
//     the rest, so at most a body redelivered across the upgrade is stored once more.
//
//   - Claim hands a pending delivery to exactly one worker at a time. It picks the oldest
//     (by arrival) delivery that is pending, due (NextAttemptAt <= now) and not leased (no
//     lease, or a lease that expired before now), and leases it to worker until now+lease.
//     Postgres: in one transaction, SELECT ... WHERE state='pending' AND next_attempt_at <= now
//     AND (lease_until IS NULL OR lease_until <= now) ORDER BY seq LIMIT 1 FOR UPDATE SKIP LOCKED,
//     then UPDATE the lease owner and expiry. Several workers on several replicas may call
//     Claim concurrently and never get the same delivery while its lease is live. An expired
//     lease makes the delivery claimable again: that is how unfinished work resumes after a
//     crash. Claim returns ok=false, and no error, when nothing is due.
//
//   - Claim counts the attempt. A delivery whose lease expired after its last allowed attempt
//     (its worker crashed every time) is dead-lettered by Claim instead of handed out again,
//     so a delivery that kills the process cannot loop forever.
//
//   - Complete, Fail, DeadLetter and Release act only if worker still holds the lease and the
//     delivery is pending; otherwise they return ErrLeaseLost and change nothing. So a worker
//     that stalled past its lease cannot finish a delivery another worker now owns.
//
//   - Fail records the error and schedules the next attempt at next, or dead-letters the
//     delivery when it has used MaxAttempts attempts. DeadLetter dead-letters at once
//     (a permanent error). Release gives the lease and the attempt back without recording
//     a failure (a worker draining on shutdown).
//
//   - Replay moves a dead delivery back to pending, due now, with attempts reset to zero.
//
//   - Prune deletes done deliveries finished before one time and dead ones dead-lettered before
//     another (a zero time keeps them all), and with them the memory of their IDs and bodies: a
//     redelivery after that is stored again. GitHub lets a delivery be redelivered for 3 days,
//     so keep at least that. Pending deliveries are never pruned.
//
// All methods are safe for concurrent use.
type Deliveries interface {
	Put(ctx context.Context, d Delivery) (inserted bool, err error)
	Claim(ctx context.Context, worker string, lease time.Duration, now time.Time) (d Delivery, ok bool, err error)
	Complete(ctx context.Context, k Key, worker string) error
	Fail(ctx context.Context, k Key, worker string, cause error, next time.Time) (FailOutcome, error)
	DeadLetter(ctx context.Context, k Key, worker string, cause error) error
	Release(ctx context.Context, k Key, worker string) error
	DeadLetters(ctx context.Context) ([]Delivery, error)
	Replay(ctx context.Context, k Key, now time.Time) error
	Get(ctx context.Context, k Key) (Delivery, error)
	Stats(ctx context.Context, now time.Time) (Stats, error)
	Prune(ctx context.Context, doneBefore, deadBefore time.Time) (deleted int, err error)
}

// bodyDigest is the SHA-256 a body is deduplicated by; nil (not compared) for an empty body.
// An unscoped delivery's is the body's own SHA-256. A scoped one's covers its scope too
// ("scope\x00" + scope + "\x00" + body; a scope holds no NUL, so no two scopes share a
// digest): the same body posted for two clusters is two deliveries, one judged in each
// cluster's repository, and a cluster that posts another's body first does not make the
// rightful post a duplicate. Rows stored before the scope was covered keep their bare digest
// (no migration: see the Deliveries doc).
func bodyDigest(scope string, body []byte) []byte {
	if len(body) == 0 {
		return nil
	}
	if scope == "" {
		sum := sha256.Sum256(body)
		return sum[:]
	}
	h := sha256.New()
	h.Write([]byte("scope\x00" + scope + "\x00"))
	h.Write(body)
	return h.Sum(nil)
}

// digestArg is a digest as a query argument: SQL NULL for none (a zero-length blob would be
// compared, and every empty body would collide).
func digestArg(digest []byte) any {
	if digest == nil {
		return nil
	}
	return digest
}

// pruneCutoff is a Prune cut-off in the stores' unix nanoseconds; a zero time prunes nothing.
func pruneCutoff(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}
