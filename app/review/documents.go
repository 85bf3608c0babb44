package review

import (
	"bytes"
	"fmt"
	"path"
	"strings"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/core/fielddiff"
)

// A YAML file is a stream of documents, and one document Parley cannot read (a parse error, a
// nesting, alias or node budget) must not hide what the others change: a veto on the first
// document of a file would otherwise vanish behind a second one nested too deep, and the file read
// as "not judged" instead. So when a file does not read whole, its documents are read one by one:
// the readable ones are judged, each unreadable one is named, and the change as a whole stays
// unjudged (Result.Unjudged), so the check cannot pass on the readable part alone.

// docProblem is one document of a file that does not read alone.
type docProblem struct {
	line int // where the document starts, 1-based
	err  error
}

// partialDiff is fielddiff.Diff for a YAML file that does not read whole (whole is Diff's error):
// the changes between the documents of old and new that read alone, and a problem for each
// document that does not, or for the whole file when reading it document by document does not
// explain the error (a Terraform file, objects defined twice, a stream that cannot be cut). A
// change is only judged when it is known: when new has an unreadable document, an object of old
// that no readable document of new defines may have moved there, so its removal is named instead
// of judged.
func partialDiff(p string, old, new []byte, whole error) ([]fielddiff.Change, []string) {
	wholeProblem := []string{fmt.Sprintf("%s: not judged: %s", p, strings.TrimPrefix(whole.Error(), p+": "))}
	if !isYAML(p) {
		return nil, wholeProblem
	}
	oldOK, oldBad, _, okOld := readableDocuments(p, old)
	newOK, newBad, newDocs, okNew := readableDocuments(p, new)
	if !okOld || !okNew || len(oldBad)+len(newBad) == 0 || new != nil && len(newBad) == newDocs {
		return nil, wholeProblem // nothing of the head's file reads, or the documents are not the cause
	}
	var oldPart, newPart []byte
	if old != nil {
		oldPart = oldOK
	}
	if new != nil {
		newPart = newOK
	}
	changes, err := fielddiff.Diff(p, oldPart, newPart)
	if err != nil {
		return nil, wholeProblem
	}
	var problems []string
	for _, d := range newBad {
		problems = append(problems, fmt.Sprintf("%s: the document at line %d is not judged: %s; the file's other documents are judged",
			p, d.line, docError(p, d.err)))
	}
	for _, d := range oldBad {
		problems = append(problems, fmt.Sprintf("%s: the document at line %d at the merge base does not read: %s; the file's other documents are judged",
			p, d.line, docError(p, d.err)))
	}
	if len(newBad) > 0 {
		defined := map[core.Field]bool{}
		if snap, err := fielddiff.Parse(p, newPart); err == nil {
			for _, f := range snap.Fields() {
				defined[f.Object()] = true
			}
		}
		kept := changes[:0]
		gone := map[core.Field]bool{}
		var goneNames []string
		for _, c := range changes {
			if obj := c.Field.Object(); !defined[obj] {
				if !gone[obj] {
					gone[obj] = true
					goneNames = append(goneNames, obj.String())
				}
				continue
			}
			kept = append(kept, c)
		}
		changes = kept
		if len(goneNames) > 0 {
			problems = append(problems, fmt.Sprintf("%s: not judged whether it removes %s: no document of the file that reads defines %s any more, and an unreadable one may",
				p, strings.Join(goneNames, ", "), pronoun(len(goneNames))))
		}
	}
	return changes, problems
}

func pronoun(n int) string {
	if n == 1 {
		return "it"
	}
	return "them"
}

// isYAML reports whether fielddiff reads p as YAML (JSON is YAML too).
func isYAML(p string) bool {
	switch strings.ToLower(path.Ext(p)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// readableDocuments cuts content into its documents and returns those that read alone, joined as
// a stream, those that do not, and how many there are. ok is false when the stream cannot be cut into documents that
// each read as they do in the stream (directives, UTF-16).
func readableDocuments(p string, content []byte) (readable []byte, bad []docProblem, n int, ok bool) {
	if content == nil {
		return nil, nil, 0, true
	}
	docs, ok := splitDocuments(content)
	if !ok {
		return nil, nil, 0, false
	}
	var out bytes.Buffer
	line := 1
	for _, d := range docs {
		// Every piece but the last ends its line, and every piece but the first starts with its
		// marker: the readable pieces joined are a stream of the same documents.
		if _, err := fielddiff.Parse(p, d); err != nil {
			bad = append(bad, docProblem{line: line, err: err})
		} else {
			out.Write(d)
		}
		line += bytes.Count(d, []byte("\n"))
	}
	return out.Bytes(), bad, len(docs), true
}

// docError is a document's error without the prefix that names the file and its document number
// as if it stood alone ("k8s/app.yaml: document 1: "): the problem names the document in the file.
func docError(p string, err error) string {
	s := err.Error()
	for _, prefix := range []string{p + ": document 1: ", p + ": document 1, ", p + ": "} {
		if rest, ok := strings.CutPrefix(s, prefix); ok {
			return rest
		}
	}
	return s
}

// splitDocuments cuts a YAML stream before each line that starts a document, as fielddiff reads
// them (fielddiff.SplitDocuments); ok is false for a stream that cannot be cut (directives,
// UTF-16). Joined, the pieces are the stream.
func splitDocuments(content []byte) (docs [][]byte, ok bool) {
	docs = fielddiff.SplitDocuments(content)
	return docs, docs != nil
}
