package tfplan

import (
	"bytes"
	"encoding/json"
	"errors"
	"unicode"
	"unicode/utf8"
)

// PrefixOver says whether prefix, the first bytes of a plan document of at most MaxPlanSize
// bytes, already proves that ParsePlan refuses the whole document with ErrTooManyResources,
// whatever the bytes after it hold. False means not proven: the prefix ends before its resource
// arrays hold more than MaxPlanResources elements, or ParsePlan would refuse the document for
// something before them, or the document is not one ParsePlan reads that far.
//
// Why: parley serve read a 33 MB plan of 300,000 resources whole (a buffer of its declared length,
// its bytes from the socket, paced for an address over its failure budget) before refusing it, a
// refusal its first 1.6 MB decide. A reader that asks as the bytes arrive refuses it there.
// A reader asking after each chunk should keep a PrefixScan, which does not scan again what it
// has already stepped over.
func PrefixOver(prefix []byte) bool {
	var s PrefixScan
	return s.Over(prefix)
}

// PrefixScan asks PrefixOver of a document as it grows, one prefix after another, each
// extending the one before (the same document, more of it). It keeps where the last call stopped:
// the top-level members already stepped over are not scanned again, and a resource array is
// counted on from its last whole element; only another member that was cut off is stepped over
// again from its start. A reader that asks each time its prefix doubles (or each time its buffer
// fills, growing it geometrically) thus scans O(total bytes). The zero PrefixScan is ready.
type PrefixScan struct {
	start   int  // where the document starts, past its leading white space, once opened
	next    int  // where the next member (or the object's end) starts, past the one before it
	count   int  // the elements of the complete resource arrays before next, by countElements
	verdict int8 // undecided, over or never
	opened  bool // start is known and the document opens an object

	// The resource array being counted (countArray): where it starts (0: none), where its next
	// element starts, the elements before that, and whether its count is final.
	arr, elem, n int
	final        bool
}

const (
	undecided int8 = iota
	proven         // over the budget, decided
	never          // ParsePlan will not refuse this document for its resources, or we cannot tell
)

// Over says whether prefix proves the document over the resource budget (PrefixOver). It
// decodes nothing but the top-level keys until it first finds the prefix's resource arrays over
// the budget by a byte count; then it confirms the answer once, as ParsePlan would decide it
// (walkPrefix), and keeps it.
func (s *PrefixScan) Over(prefix []byte) bool {
	switch s.verdict {
	case proven:
		return true
	case never:
		return false
	}
	if len(prefix) > MaxPlanSize {
		s.verdict = never // ParsePlan refuses it for its size first
		return false
	}
	if !s.opened {
		// ParsePlan trims white space as bytes.TrimSpace does (Unicode's, not only JSON's), then
		// wants an object.
		doc := bytes.TrimLeftFunc(prefix, unicode.IsSpace)
		if len(doc) == 0 || (doc[0] >= utf8.RuneSelf && !utf8.FullRune(doc)) {
			return false // only white space yet, or a rune cut in two
		}
		if doc[0] != '{' {
			s.verdict = never
			return false
		}
		s.start, s.next, s.opened = len(prefix)-len(doc), len(prefix)-len(doc)+1, true
	}
	// The cheap count: eachMember's walk over the prefix, counting each resource array with
	// countElements and stepping over everything else with valueEnd. It goes on only past values
	// the prefix holds whole, with a byte after them (a number or a literal at the prefix's end
	// may go on), and decodes nothing.
	for {
		i := skipSpace(prefix, s.next)
		if i >= len(prefix) {
			return false
		}
		if prefix[i] == '}' {
			s.verdict = never // the object ended within the budget
			return false
		}
		if prefix[i] == ',' {
			i = skipSpace(prefix, i+1)
		}
		end := valueEnd(prefix, i)
		if end >= len(prefix) {
			return false
		}
		var key string
		if json.Unmarshal(prefix[i:end], &key) != nil {
			s.verdict = never // ParsePlan names the key
			return false
		}
		if i = skipSpace(prefix, end); i >= len(prefix) { // the ':'
			return false
		}
		if i = skipSpace(prefix, i+1); i >= len(prefix) {
			return false
		}
		rest := prefix[i:]
		if key == "resource_changes" || key == "resource_drift" {
			n, done, over := s.countArray(prefix, i)
			if over {
				s.verdict = never
				if walkPrefix(prefix[s.start:]) {
					s.verdict = proven
				}
				return s.verdict == proven
			}
			if !done {
				return false // the array goes on: counted on from its last whole element next time
			}
			if end = valueEnd(rest, 0); end >= len(rest) {
				return false
			}
			s.count += n
			s.arr = 0
		} else if end = valueEnd(rest, 0); end >= len(rest) {
			return false
		}
		s.next = i + end
	}
}

// countArray goes on counting the elements of the resource array that starts at prefix[i], as
// countElements counts them (an element counts once it starts; the count stops at the first byte
// that cannot start one, or at anything but a comma after one), against the budget the arrays
// before it left. It keeps where it stopped: an element the prefix cuts off is counted from its
// start next time, so the count scans each byte of the array about once however often it is
// asked (finding the array's end once counted steps over it again, once). done says
// the count of the array is final; over, that it passed the budget.
func (s *PrefixScan) countArray(prefix []byte, i int) (n int, done, over bool) {
	if s.arr != i {
		s.arr, s.elem, s.n, s.final = i, skipSpace(prefix, i+1), 0, prefix[i] != '['
	}
	for !s.final && s.elem < len(prefix) {
		p := s.elem
		if !startsValue(prefix[p]) {
			s.final = true
			break
		}
		if s.n+1 > MaxPlanResources-s.count {
			return s.n + 1, false, true
		}
		q := skipSpace(prefix, valueEnd(prefix, p))
		if q >= len(prefix) {
			return s.n, false, false // this element again, whole, next time
		}
		s.n++
		if prefix[q] != ',' {
			s.final = true
			break
		}
		s.elem = skipSpace(prefix, q+1)
	}
	return s.n, s.final, false
}

// walkPrefix is ParsePlan's own walk (decodePlan) over doc, the start of a trimmed document,
// decoding what ParsePlan decodes before the resources that pass the budget: the members it
// reads (format_version, configuration, ...) and the resource arrays within the budget. It says
// whether that walk refuses the document past the budget within doc. Every step of the walk
// decides on bytes before the one it stands on: a value that doc cuts off fails to decode or
// leaves eachMember at doc's end (an error, here "not proven"); a count past the budget happens
// at an element's first byte, inside doc. So ErrTooManyResources here is ParsePlan's answer for
// any document doc begins. It runs once per document, when the byte count first says over: a
// plan within the budget is never decoded twice.
func walkPrefix(doc []byte) bool {
	_, _, err := decodePlan(doc, (*planDecoder).resources)
	return errors.Is(err, ErrTooManyResources)
}
